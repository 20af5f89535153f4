// A software WebAuthn authenticator for tests (issue 35's passkey step-up): one P-256 (ES256)
// credential, "none" attestation, user present + verified, a signature counter that counts. It
// makes exactly what a browser's `PublicKeyCredential.toJSON()` gives the server — registration
// and assertion — so @simplewebauthn/server verifies it like a real passkey. Shapes: WebAuthn L2
// §6.1 (authenticator data), §6.5.1 (attested credential data), §8.7 (none), COSE key RFC 9053.
import { isoBase64URL, isoCBOR } from "@simplewebauthn/server/helpers";

const b64url = (bytes: Uint8Array) => isoBase64URL.fromBuffer(bytes as Uint8Array<ArrayBuffer>);
const utf8 = (text: string) => new TextEncoder().encode(text);
const sha256 = async (bytes: Uint8Array) =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};
const uint32 = (n: number) =>
  new Uint8Array([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);

/** WebCrypto signs ECDSA as r‖s; WebAuthn carries it as a DER SEQUENCE of two INTEGERs. */
function derSignature(raw: Uint8Array): Uint8Array {
  const integer = (bytes: Uint8Array) => {
    let start = 0;
    while (start < bytes.length - 1 && bytes[start] === 0) start++;
    const trimmed = bytes.slice(start);
    const body = trimmed[0]! & 0x80 ? concat(new Uint8Array([0]), trimmed) : trimmed;
    return concat(new Uint8Array([0x02, body.length]), body);
  };
  const seq = concat(integer(raw.slice(0, 32)), integer(raw.slice(32)));
  return concat(new Uint8Array([0x30, seq.length]), seq);
}

const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

export class SoftAuthenticator {
  private counter = 0;
  private constructor(
    private readonly keys: CryptoKeyPair,
    readonly credentialId: Uint8Array,
  ) {}

  static async create(): Promise<SoftAuthenticator> {
    const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
      "verify",
    ])) as CryptoKeyPair;
    return new SoftAuthenticator(keys, crypto.getRandomValues(new Uint8Array(16)));
  }

  get id(): string {
    return b64url(this.credentialId);
  }

  private async authData(rpId: string, flags: number, attested?: Uint8Array) {
    return concat(
      await sha256(utf8(rpId)),
      new Uint8Array([flags]),
      uint32(this.counter),
      attested ?? new Uint8Array(),
    );
  }

  /** The answer to `navigator.credentials.create` with these options, made at `origin`. */
  async register(options: { challenge: string; rp: { id?: string } }, origin: string) {
    const jwk = (await crypto.subtle.exportKey("jwk", this.keys.publicKey)) as JsonWebKey;
    const cose = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2], // kty: EC2
        [3, -7], // alg: ES256
        [-1, 1], // crv: P-256
        [-2, isoBase64URL.toBuffer(jwk.x!)],
        [-3, isoBase64URL.toBuffer(jwk.y!)],
      ]),
    );
    const idLength = new Uint8Array([
      this.credentialId.length >> 8,
      this.credentialId.length & 255,
    ]);
    const attested = concat(new Uint8Array(16), idLength, this.credentialId, cose);
    const authData = await this.authData(options.rp.id!, UP | UV | AT, attested);
    const attestationObject = isoCBOR.encode(
      new Map<string, unknown>([
        ["fmt", "none"],
        ["attStmt", new Map()],
        ["authData", authData],
      ]) as never,
    );
    const clientData = {
      type: "webauthn.create",
      challenge: options.challenge,
      origin,
      crossOrigin: false,
    };
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key" as const,
      response: {
        clientDataJSON: b64url(utf8(JSON.stringify(clientData))),
        attestationObject: b64url(attestationObject),
        transports: ["internal"],
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform" as const,
    };
  }

  /** The answer to `navigator.credentials.get` over `challenge` (base64url) for `rpId`, at `origin`. */
  async assert(challenge: string, rpId: string, origin: string) {
    this.counter += 1;
    const authData = await this.authData(rpId, UP | UV);
    const clientDataJSON = utf8(
      JSON.stringify({ type: "webauthn.get", challenge, origin, crossOrigin: false }),
    );
    const signed = new Uint8Array(
      await crypto.subtle.sign(
        { name: "ECDSA", hash: "SHA-256" },
        this.keys.privateKey,
        concat(authData, await sha256(clientDataJSON)),
      ),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key" as const,
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(derSignature(signed)),
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform" as const,
    };
  }
}
