// The console's one script (issue 35), served as /console/assets/passkey.js under the CSP's
// `script-src 'self'`: WebAuthn lives in the browser's navigator.credentials, which no form reaches.
// Registering: fetch the options, create the passkey, post it as JSON. Approving a step-up call: an
// assertion over the card's challenge (derived from the operation's input hash) goes in the form's
// `passkey` field, then the form is sent. The server verifies everything; this only carries bytes.
export const PASSKEY_JS = `"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-passkey]") : null;
  if (!button) return;
  event.preventDefault();
  const form = button.closest("form");
  try {
    if (button.dataset.passkey === "register") {
      const options = await (await fetch(button.dataset.options, { credentials: "same-origin" })).json();
      const created = await navigator.credentials.create({
        publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options),
      });
      form.elements.namedItem("response").value = JSON.stringify(created.toJSON());
    } else {
      const asserted = await navigator.credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON({
          challenge: button.dataset.challenge,
          rpId: location.hostname,
          userVerification: "required",
        }),
      });
      form.elements.namedItem("passkey").value = JSON.stringify(asserted.toJSON());
    }
    form.submit();
  } catch (error) {
    window.alert("The passkey step did not complete: " + (error && error.message ? error.message : error));
  }
});
`;
