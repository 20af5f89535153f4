// The console's one stylesheet, served from /console/assets/console.css (a file, not inline, so the
// Content-Security-Policy can forbid inline styles and every script). System fonts, one readable
// column, contrast of at least 4.5:1 for text, a visible focus ring on everything focusable.
export const CONSOLE_CSS = `
:root {
  --fg: #1b1f24; --muted: #4a5360; --bg: #ffffff; --panel: #f5f7fa; --line: #d4dae2;
  --accent: #0b57d0; --accent-fg: #ffffff; --danger: #a4161a; --ok: #146c2e; --warn: #8a4b00;
  --focus: #f59e0b; --radius: 6px;
  color-scheme: light;
}
* { box-sizing: border-box; }
html { font-size: 100%; }
body {
  margin: 0; color: var(--fg); background: var(--bg);
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, sans-serif;
  line-height: 1.5; -webkit-text-size-adjust: 100%;
}
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.9em; overflow-wrap: anywhere; }
a { color: var(--accent); }
a:hover { text-decoration-thickness: 2px; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; top: 0; background: var(--bg); padding: 0.5rem 1rem; z-index: 10; }
.skip:focus { left: 1rem; top: 0.5rem; }

.site-header { background: #14213d; color: #ffffff; }
.site-header .bar { max-width: 72rem; margin: 0 auto; padding: 0.75rem 1.25rem; display: flex; flex-wrap: wrap; gap: 0.75rem 1.5rem; align-items: center; }
.brand { color: #ffffff; font-weight: 700; text-decoration: none; font-size: 1.1rem; letter-spacing: 0.01em; }
.site-header nav ul { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 0.25rem 1rem; }
.site-header nav a { color: #e6ecf5; text-decoration: none; padding: 0.25rem 0.1rem; border-bottom: 2px solid transparent; }
.site-header nav a:hover { color: #ffffff; border-bottom-color: #8fb3ff; }
.site-header nav a[aria-current="page"] { color: #ffffff; border-bottom-color: #ffffff; font-weight: 600; }
.who { margin-left: auto; display: flex; gap: 0.75rem; align-items: center; font-size: 0.9rem; color: #e6ecf5; }
.who form { margin: 0; }
.who button { background: transparent; color: #ffffff; border: 1px solid #8a9bb8; }
.who button:hover { background: #22335a; }

main { max-width: 72rem; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.6rem; line-height: 1.25; margin: 0.25rem 0 1rem; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; margin: 2rem 0 0.75rem; }
h3 { font-size: 1.05rem; margin: 0; }
p { margin: 0.5rem 0; }
.lede { color: var(--muted); max-width: 45rem; }
.site-footer { max-width: 72rem; margin: 0 auto; padding: 1rem 1.25rem 2rem; color: var(--muted); font-size: 0.85rem; border-top: 1px solid var(--line); }

.panel > h2:first-child, .panel > h1:first-child { margin-top: 0; }
section > h3 { margin: 1.25rem 0 0.5rem; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 1rem 1.25rem; }
.grid { display: grid; gap: 1rem; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); }
.card { border: 1px solid var(--line); border-radius: var(--radius); padding: 1rem 1.25rem; background: var(--bg); }
.card h2 { margin-top: 0; font-size: 1.05rem; }
.placeholder { border-style: dashed; }

dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.35rem 1.25rem; margin: 0; }
dl.facts dt { color: var(--muted); font-weight: 600; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }

table { border-collapse: collapse; width: 100%; font-size: 0.95rem; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.5rem; }
th, td { text-align: left; padding: 0.45rem 0.75rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }

form.stack { display: grid; gap: 0.75rem; max-width: 32rem; }
form.inline { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: end; }
.actions { display: flex; flex-wrap: wrap; gap: 0.5rem; }
label { font-weight: 600; display: block; }
.hint { color: var(--muted); font-size: 0.9rem; margin: 0.15rem 0 0; font-weight: 400; }
input[type="text"], input[type="password"] {
  font: inherit; padding: 0.5rem 0.65rem; border: 1px solid #7b8594; border-radius: var(--radius); width: 100%; min-width: 16rem; background: #ffffff; color: var(--fg);
}
button {
  font: inherit; cursor: pointer; padding: 0.5rem 1rem; border-radius: var(--radius);
  border: 1px solid var(--accent); background: var(--accent); color: var(--accent-fg); font-weight: 600;
}
button:hover { background: #0842a0; }

.alert { border-left: 4px solid var(--danger); background: #fdecec; color: #5c0b0e; padding: 0.75rem 1rem; border-radius: var(--radius); margin: 0 0 1rem; }
.notice { border-left: 4px solid var(--accent); background: #eaf1fd; padding: 0.75rem 1rem; border-radius: var(--radius); margin: 0 0 1rem; }

.badge { display: inline-block; padding: 0.05rem 0.55rem; border-radius: 999px; font-size: 0.8rem; font-weight: 600; border: 1px solid currentColor; white-space: nowrap; }
.badge.succeeded, .badge.active, .badge.verified { color: var(--ok); background: #e7f4ea; }
.badge.failed, .badge.rejected, .badge.cancelled, .badge.budget_exhausted, .badge.expired { color: var(--danger); background: #fdecec; }
.badge.outcome_unknown, .badge.awaiting_approval, .badge.unverified, .badge.verified_sandbox_only { color: var(--warn); background: #fff3e0; }
.badge.pending { color: #1d4ed8; background: #eaf1fd; }

.op { border: 1px solid var(--line); border-radius: var(--radius); margin: 0 0 1.25rem; }
.op > header { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: baseline; padding: 0.75rem 1rem; background: var(--panel); border-bottom: 1px solid var(--line); border-radius: var(--radius) var(--radius) 0 0; }
.op > header .ids { color: var(--muted); font-size: 0.85rem; }
ol.timeline { list-style: none; margin: 0; padding: 0.5rem 1rem 0.75rem; }
ol.timeline > li { display: grid; grid-template-columns: 9.5rem 13.5rem 1fr; gap: 0.25rem 1rem; padding: 0.4rem 0; border-bottom: 1px dashed var(--line); }
ol.timeline > li:last-child { border-bottom: 0; }
ol.timeline time { color: var(--muted); font-variant-numeric: tabular-nums; font-size: 0.9rem; }
ol.timeline .what { font-weight: 600; }
ol.timeline .details { overflow-wrap: anywhere; }
.kv { display: inline; margin: 0 0.9rem 0 0; }
ol.timeline ul { margin: 0.25rem 0 0; padding-left: 1.1rem; }
.kv b { font-weight: 600; color: var(--muted); }
.notice.success { border-left-color: var(--ok); background: #e7f4ea; color: #0d3d1b; }
.empty { color: var(--muted); font-style: italic; }
nav.tabs { display: flex; gap: 0.25rem; border-bottom: 1px solid var(--line); margin: 0 0 1.25rem; }
nav.tabs a { padding: 0.5rem 1rem; text-decoration: none; color: var(--fg); border: 1px solid transparent; border-bottom: 0; border-radius: var(--radius) var(--radius) 0 0; margin-bottom: -1px; }
nav.tabs a:hover { background: var(--panel); }
nav.tabs a[aria-current="page"] { background: var(--bg); border-color: var(--line); font-weight: 600; color: var(--accent); }
nav.pager { display: flex; gap: 1.5rem; margin: 1rem 0; }

.item { border: 1px solid var(--line); border-radius: var(--radius); margin: 0 0 1.5rem; background: var(--bg); }
.item > header { display: flex; flex-wrap: wrap; gap: 0.5rem 0.75rem; align-items: center; padding: 0.75rem 1.25rem; background: var(--panel); border-bottom: 1px solid var(--line); border-radius: var(--radius) var(--radius) 0 0; }
.item > header h2 { margin: 0; font-size: 1.2rem; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; overflow-wrap: anywhere; }
.item-body { padding: 1rem 1.25rem 1.25rem; }
.item-body > h3 { margin: 1.25rem 0 0.5rem; }
.chip { font-size: 0.85rem; font-weight: 600; color: var(--warn); }
.chip.expired { color: var(--danger); }
code.method { font-weight: 700; }
pre { margin: 0; padding: 0.75rem 1rem; background: #f0f3f7; border: 1px solid var(--line); border-radius: var(--radius); overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.9rem; line-height: 1.45; max-height: 28rem; }
pre code { font-size: inherit; }
.preview > p { margin-top: 0; }
.fingerprint { margin-top: 1rem; font-size: 0.8rem; }

.decide { display: grid; gap: 1rem 1.5rem; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); margin-top: 1.25rem; padding-top: 1rem; border-top: 1px solid var(--line); }
.decide form.stack { max-width: none; }
textarea {
  font: inherit; padding: 0.5rem 0.65rem; border: 1px solid #7b8594; border-radius: var(--radius); width: 100%; background: #ffffff; color: var(--fg); resize: vertical;
}
textarea.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.9rem; }
button.approve { background: var(--ok); border-color: var(--ok); }
button.approve:hover { background: #0e5222; }
button.reject { background: #ffffff; color: var(--danger); border-color: var(--danger); }
button.reject:hover { background: #fdecec; }

form.resolve { max-width: 40rem; margin-top: 1.25rem; padding-top: 1rem; border-top: 1px solid var(--line); }
fieldset { border: 1px solid var(--line); border-radius: var(--radius); padding: 0.5rem 1rem 0.75rem; margin: 0; }
legend { font-weight: 600; padding: 0 0.35rem; }
.choice { display: grid; grid-template-columns: auto 1fr; gap: 0 0.6rem; align-items: baseline; padding: 0.35rem 0; }
.choice input { margin: 0; width: 1.1rem; height: 1.1rem; accent-color: var(--accent); }
.choice label { font-weight: 600; }
.choice .hint { grid-column: 2; margin: 0; }
table.attempts td { font-size: 0.92rem; }
.observed { display: block; margin-top: 0.2rem; color: var(--muted); }
table.decided details { margin-top: 0.25rem; }
table.decided summary { cursor: pointer; color: var(--accent); font-size: 0.9rem; }
table.decided pre { margin-top: 0.35rem; max-width: 28rem; }
.count { font-size: 2rem; font-weight: 700; margin: 0.25rem 0; font-variant-numeric: tabular-nums; }
figure.chart { margin: 0 0 1rem; padding: 0.75rem 1rem; border: 1px solid var(--line); border-radius: var(--radius); }
figure.chart svg { display: block; max-width: 100%; height: auto; }
ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 0.25rem 1.25rem; margin: 0.5rem 0; padding: 0; font-size: 0.9rem; }
ul.legend li { display: inline-flex; align-items: center; gap: 0.35rem; }
figure.chart details { margin-top: 0.5rem; }
figure.chart summary, details.more summary { cursor: pointer; color: var(--accent); }
.scroll { overflow-x: auto; }
form.filters { margin: 0 0 1rem; }
form.filters input[type="text"] { min-width: 12rem; }
select { font: inherit; padding: 0.45rem 0.5rem; border: 1px solid #7b8594; border-radius: var(--radius); background: #ffffff; color: var(--fg); }
.waterfall { margin: 0 0 1.5rem; }
@media (max-width: 40rem) {
  ol.timeline > li { grid-template-columns: 1fr; }
  .who { margin-left: 0; }
}
`;
