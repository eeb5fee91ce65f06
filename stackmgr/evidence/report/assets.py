"""The site's only style and script, inline in every page, and the Content-Security-Policy that allows just them.

No external assets: the directory works from file:// and offline. The policy runs no script at all except the
graveyard's own, allowed by its hash, so even a missed escape could not execute.
"""

from __future__ import annotations

import base64
import hashlib


def content_security_policy(script: str) -> str:
    """The policy of a page that carries `script` (empty: a page that runs none)."""
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    if script:
        digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
        csp += f"; script-src 'sha256-{digest}'"
    return csp


GRAVEYARD_JS = """
(function () {
  var q = document.getElementById('q'), count = document.getElementById('count');
  var none = document.getElementById('none');
  var lanes = Array.prototype.slice.call(document.querySelectorAll('.lane'));
  function filter() {
    var terms = q.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
    lanes.forEach(function (lane) {
      var text = lane.textContent.toLowerCase();
      var hit = terms.every(function (t) { return text.indexOf(t) >= 0; });
      lane.hidden = !hit;
      if (hit) { shown++; }
    });
    count.textContent = shown + ' of ' + lanes.length;
    none.hidden = shown > 0 || lanes.length === 0;
  }
  var given = new URLSearchParams(location.search).get('q');
  if (given) { q.value = given; }
  q.addEventListener('input', filter);
  filter();
})();
"""

CSS = """
:root{--bg:#f6f7f9;--panel:#fff;--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--soft:#eef1f4;--accent:#0969da;
--green:#1a7f37;--green-bg:#dcf5e3;--red:#c0262d;--red-bg:#ffe6e4;--amber:#8a5a00;--amber-bg:#fff4c2;
--grey:#57606a;--grey-bg:#e9ecef;--teal:#0a6f76;--teal-bg:#d7f2f3;--orange:#a84300;--orange-bg:#ffeadb;
--add:#e7f8ea;--add-ln:#c9f0d1;--del:#fdecea;--del-ln:#f9d3cf;--hunk:#e6f0fb;--hunk-fg:#38598a}
@media (prefers-color-scheme: dark){:root{--bg:#0d1117;--panel:#161b22;--fg:#e6edf3;--muted:#8d96a0;--line:#30363d;
--soft:#1c2128;--accent:#4493f8;--green:#3fb950;--green-bg:#12361f;--red:#f85149;--red-bg:#3d1418;--amber:#d29922;
--amber-bg:#3a2d0b;--grey:#9ea7b3;--grey-bg:#272c33;--teal:#39c5cf;--teal-bg:#0f3336;--orange:#f0883e;
--orange-bg:#3b2312;--add:#12261a;--add-ln:#1a3a25;--del:#2d1517;--del-ln:#4a1d21;--hunk:#121d2f;--hunk-fg:#8fb4e8}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,
"Noto Sans","Helvetica Neue",Arial,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.mono,code,pre,table.diff,.desc{font-family:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,"DejaVu Sans Mono",
"Liberation Mono",monospace}
.mono,code{font-size:.88em}
header.top{display:flex;flex-wrap:wrap;align-items:center;gap:.4rem 1.6rem;padding:.55rem 1.5rem;background:#1f2a37;
color:#e8edf2}
header.top a{color:#e8edf2}
.brand{font-weight:700;letter-spacing:.01em}.brand span{font-weight:400;opacity:.7;margin-left:.35em}
header nav{display:flex;gap:1.1rem}header nav a{opacity:.78;padding:.15rem 0;border-bottom:2px solid transparent}
header nav a.on{opacity:1;border-bottom-color:#7cb7ff}header nav a:hover{opacity:1;text-decoration:none}
.count{display:inline-block;min-width:1.5em;padding:0 .4em;border-radius:1em;background:#3b4a5c;font-size:.8em;
text-align:center}
.store{margin-left:auto;opacity:.6;font-size:.8em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
max-width:40vw}
main{max-width:1680px;margin:0 auto;padding:1.2rem 1.5rem 2.5rem}
footer{max-width:1680px;margin:0 auto;padding:0 1.5rem 2rem;color:var(--muted);font-size:.8em}
h1{font-size:1.45rem;margin:.3rem 0 .6rem;line-height:1.3;overflow-wrap:anywhere}
h1 .badge{font-size:.6em;vertical-align:middle}
h2{font-size:1.08rem;margin:1.4rem 0 .55rem}h2 small,h1 small{font-weight:400;color:var(--muted);font-size:.85em}
.muted{color:var(--muted)}.nowrap{white-space:nowrap}.num{text-align:right;font-variant-numeric:tabular-nums}
.crumbs{font-size:.85em;color:var(--muted)}
.lead{font-size:1.05rem;margin:.1rem 0 .7rem}
.tiles{display:flex;flex-wrap:wrap;gap:.6rem;margin:.4rem 0 1rem}
.tile{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:.45rem .8rem;font-size:.92em}
.tile b{font-size:1.15em}
.toc{display:flex;flex-wrap:wrap;gap:.4rem}
.chip{display:inline-block;padding:.1rem .6rem;border:1px solid var(--line);border-radius:1em;background:var(--panel);
font-size:.85em}
section.series{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:.2rem 1rem .8rem;
margin:1rem 0}
.scroll{overflow-x:auto}
table{border-collapse:collapse}
table.patches,table.list{width:100%;font-size:.92em}
table.patches th,table.list th{text-align:left;font-weight:600;color:var(--muted);font-size:.82em;
text-transform:uppercase;letter-spacing:.04em;border-bottom:1px solid var(--line);padding:.35rem .6rem}
table.patches td,table.list td{padding:.45rem .6rem;border-bottom:1px solid var(--soft);vertical-align:top}
table.patches tr:last-child td,table.list tr:last-child td{border-bottom:0}
td.pos{color:var(--muted);width:2em;text-align:right}
.subject{color:var(--muted);font-size:.92em}
tr.missing td{opacity:.8}
tr.amended td{opacity:.55}
.badge{display:inline-block;padding:.05rem .55rem;border-radius:1em;font-size:.78em;font-weight:600;
letter-spacing:.02em;white-space:nowrap;border:1px solid transparent}
.st-promoted{background:var(--green-bg);color:var(--green)}
.st-rejected{background:var(--red-bg);color:var(--red)}
.st-experimental,.st-inconclusive{background:var(--amber-bg);color:var(--amber)}
.st-unlinked,.st-superseded{background:var(--grey-bg);color:var(--grey)}
.dnr{background:var(--red);color:#fff}
.state{display:inline-block;font-size:.8em;padding:.02rem .45rem;border-radius:4px;white-space:nowrap;
margin:.05rem 0}
.s-fresh{color:var(--green);background:var(--green-bg)}.s-equivalent{color:var(--teal);background:var(--teal-bg)}
.s-stale{color:var(--orange);background:var(--orange-bg)}.s-broken{color:var(--red);background:var(--red-bg)}.s-edited{color:var(--red);background:var(--red-bg)}
.s-orphaned{color:var(--grey);background:var(--grey-bg)}.s-baseline{color:var(--grey);background:var(--grey-bg)}.s-residue{color:var(--amber);background:var(--amber-bg)}
.gate{display:inline-block;font-size:.8em;padding:.02rem .45rem;border-radius:4px;margin:.05rem .1rem .05rem 0;
white-space:nowrap;border:1px solid var(--line)}
.g-pass{color:var(--green);border-color:var(--green)}.g-fail{color:var(--red);border-color:var(--red)}
.g-error{color:var(--orange);border-color:var(--orange)}.g-not-run{color:var(--grey)}
.tree{display:inline-block;font-size:.8em;padding:0 .45rem;border-radius:4px;background:var(--soft);
color:var(--fg);font-weight:500;white-space:nowrap}
.guard{font-size:.78em;color:var(--teal)}
.metric{white-space:nowrap}.mname{color:var(--muted);font-size:.9em}
.delta{font-size:.85em;font-weight:600;white-space:nowrap}.delta .abs{font-weight:400;color:var(--muted)}
.good{color:var(--green)}.bad{color:var(--red)}.flat{color:var(--muted)}.ok{color:var(--green)}
.plus{color:var(--green);font-weight:600}.minus{color:var(--red);font-weight:600}
dl.facts{display:flex;flex-wrap:wrap;gap:.3rem 1.6rem;margin:.2rem 0 .8rem;font-size:.9em}
dl.facts div{display:flex;gap:.4rem;align-items:baseline}dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
.desc{white-space:pre-wrap;background:var(--panel);border:1px solid var(--line);border-left:3px solid var(--accent);
border-radius:6px;padding:.6rem .9rem;font-size:.85em;max-height:22em;overflow:auto;margin:.4rem 0 1rem}
.error{color:var(--red);background:var(--red-bg);padding:.4rem .7rem;border-radius:6px}
.note{font-size:.85em;margin:.3rem 0}
.split{display:grid;grid-template-columns:minmax(0,1fr) minmax(360px,460px);gap:1.4rem;align-items:start}
@media (max-width:1100px){.split{grid-template-columns:minmax(0,1fr)}.evidence{position:static;max-height:none}
.evidence{order:-1}}
.evidence{position:sticky;top:.8rem;max-height:calc(100vh - 1.6rem);overflow:auto;padding-right:.2rem}
.evidence h2,.diffcol>h2{margin-top:.2rem}
table.diffstat{font-size:.85em;margin-bottom:.8rem}
table.diffstat td{padding:.1rem .8rem .1rem 0}
td.bars{white-space:nowrap}.bp,.bm{display:inline-block;height:.6em}.bp{background:var(--green)}
.bm{background:var(--red)}
.kind{font-size:.75em;padding:0 .35rem;border-radius:4px;background:var(--grey-bg);color:var(--grey);
font-family:system-ui,sans-serif}
section.file{background:var(--panel);border:1px solid var(--line);border-radius:8px;margin:0 0 1rem;overflow:hidden}
.fname{padding:.45rem .8rem;background:var(--soft);border-bottom:1px solid var(--line);font-size:.9em;
overflow-wrap:anywhere}
.cited{margin-left:.8rem;font-size:.85em;color:var(--muted)}
table.diff{width:100%;font-size:12.5px;line-height:1.45;tab-size:4;-moz-tab-size:4}
table.diff td{padding:0 .6rem;vertical-align:top}
table.diff td.code{white-space:pre;width:100%}
table.diff td.ln{color:var(--muted);text-align:right;user-select:none;min-width:2.8em;font-size:.92em;opacity:.8;
padding:0 .35rem;border-right:1px solid var(--soft)}
tr.add td.code{background:var(--add)}tr.add td.ln{background:var(--add-ln)}
tr.del td.code{background:var(--del)}tr.del td.ln{background:var(--del-ln)}
tr.hunk td{background:var(--hunk);color:var(--hunk-fg)}tr.hunk td.code{padding:.15rem .6rem}
tr.fh td.code{color:var(--muted);font-weight:600}tr.meta td.code{color:var(--muted)}
tr.fh td.code,tr.meta td.code{background:var(--soft)}tr.fh td.ln,tr.meta td.ln{background:var(--soft)}
tr.nonl td.code{color:var(--muted);font-style:italic}
.sign{display:inline-block;width:1.1em;color:var(--muted);user-select:none}
tr.add .sign{color:var(--green)}tr.del .sign{color:var(--red)}
.cr{color:var(--orange)}
table.preview td.code{white-space:pre-wrap;word-break:break-all}
tr.err td.code{background:var(--red-bg);color:var(--red)}
tr.err td.ln{background:var(--red-bg);color:var(--red);opacity:1}
tr.tb td.code{background:var(--del)}tr.tb td.ln{background:var(--del)}
tr.omit td{background:var(--soft);color:var(--muted);font-style:italic;padding:.25rem .6rem}
table.preview tr:target td{background:var(--hunk);box-shadow:inset 3px 0 0 var(--accent)}
ul.jumps{list-style:none;margin:.3rem 0 .9rem;padding:.45rem .75rem;background:var(--panel);
border:1px solid var(--line);border-left:4px solid var(--red);border-radius:8px;font-size:.88em}
ul.jumps li{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}ul.jumps a{display:inline-block;min-width:5.5em}
.card{background:var(--panel);border:1px solid var(--line);border-left:4px solid var(--grey);border-radius:8px;
padding:.6rem .8rem;margin:0 0 .8rem;font-size:.9em}
.card.c-fresh{border-left-color:var(--green)}.card.c-equivalent{border-left-color:var(--teal)}
.card.c-stale{border-left-color:var(--orange)}.card.c-broken{border-left-color:var(--red)}
.card.amended{opacity:.6}
.card:target{box-shadow:0 0 0 2px var(--accent)}
.card-head{display:flex;flex-wrap:wrap;gap:.3rem .5rem;align-items:center}
.date{color:var(--muted);font-variant-numeric:tabular-nums;font-size:.92em}
.lid{font-weight:600;white-space:nowrap}
table.metrics{margin:.5rem 0 .3rem;font-size:.95em;width:100%}
table.metrics td{padding:.1rem .5rem .1rem 0;border-bottom:1px solid var(--soft)}
table.metrics caption{text-align:left;color:var(--muted);font-size:.85em;padding-bottom:.15rem}
.gates{margin:.35rem 0}
.lesson{white-space:pre-wrap;background:var(--amber-bg);border-radius:6px;padding:.45rem .65rem;margin:.45rem 0;
overflow-wrap:anywhere}
.lesson .label{display:block;font-size:.72em;text-transform:uppercase;letter-spacing:.06em;color:var(--amber);
font-weight:700}
ul.arts,ul.stack{list-style:none;padding:0;margin:.4rem 0}ul.arts li,ul.stack li{margin:.15rem 0;
overflow-wrap:anywhere}
details{margin:.3rem 0;font-size:.92em}summary{cursor:pointer;color:var(--muted)}
.meta{color:var(--muted);font-size:.85em;margin-top:.3rem}
h1.path{font-size:1.2rem}
.search{position:sticky;top:0;background:var(--bg);padding:.5rem 0 .7rem;z-index:1}
.search input{width:min(560px,100%);font:inherit;padding:.45rem .75rem;border:1px solid var(--line);border-radius:8px;
background:var(--panel);color:var(--fg)}
.lane{background:var(--panel);border:1px solid var(--line);border-left:4px solid var(--red);border-radius:10px;
padding:.2rem 1rem .7rem;margin:0 0 1rem}
.lane h2{margin:.7rem 0 .2rem}
.grave{border-top:1px solid var(--soft);padding:.5rem 0 .1rem}
.gm{font-size:.9em;margin:.2rem 0}
figure.picture{margin:.6rem 0 1rem}figure.picture svg{max-width:100%;height:auto;background:#fff;color:#1f2328;
border:1px solid var(--line);border-radius:8px}
figure.picture figcaption{color:var(--muted);font-size:.85em;max-width:880px}
section.headline{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:.2rem 1rem .4rem;
margin:0 0 1rem}section.headline h2{margin:.6rem 0 .3rem}
details.more summary{font-size:.9em}
@media print{figure.picture svg{border:0}details.more{display:block}}
"""
