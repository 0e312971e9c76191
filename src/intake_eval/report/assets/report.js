/* intake-eval report: drilldown + transcript viewer. No network: conversation shards are local
   <script> files (conversations/<shard>.js) that call IE_SHARD(name, data) when loaded. */
(function () {
  "use strict";
  var IE = window.IE_DATA;
  var shards = {}, pending = {}, state = { conv: null, judge: IE.judges[0] || null, cell: null };
  var OUT = { "3": ["active", "\u2713", "active discovery (asked + disclosed)"], "2": ["bleed", "!", "bleed (disclosed without ask)"],
              "1": ["asked", "?", "asked, never disclosed"], "0": ["missed", "", "never asked, never disclosed"] };
  var PAGE = 25;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else if (attrs[k] === null || attrs[k] === undefined) return;
      else if (k.slice(0, 2) === "on") node.addEventListener(k.slice(2), attrs[k]);
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function label(d) { return IE.labels[d] || d.replace(/_/g, " "); }
  function phenotypeName(p) { return (IE.phenotype_names || {})[p] || p; }
  /* Everything a profile is shown with, ids and labels alike, lower-cased: what search matches. */
  function profileText(pid) {
    var p = IE.profiles[pid] || ["", "", [], ""];
    return [pid, p[0], phenotypeName(p[0]), p[1], p[3]].concat(p[2], p[2].map(label)).join(" ").toLowerCase();
  }
  function pct(v) { return v === null || v === undefined ? "\u2013" : (100 * v).toFixed(0) + "%"; }

  /* ------------------------------------------------------------ shard loading */
  window.IE_SHARD = function (name, data) {
    shards[name] = data;
    (pending[name] || []).forEach(function (fn) { fn(data); });
    delete pending[name];
  };
  function withShard(name, fn) {
    if (shards[name]) return fn(shards[name]);
    if (pending[name]) { pending[name].push(fn); return; }
    pending[name] = [fn];
    var s = document.createElement("script");
    s.src = "conversations/" + name + ".js";
    s.onerror = function () {
      delete pending[name];
      showMessage("Could not load conversations/" + name + ".js \u2014 keep the conversations/ folder next to index.html.");
    };
    document.head.appendChild(s);
  }
  var byId = {};
  IE.convs.forEach(function (c) { byId[c[0]] = c; });
  /* What transcripts.js (the viewer's filter and search) builds on. */
  var VIEW = window.IE_VIEW = { el: el, label: label, pct: pct, phenotypeName: phenotypeName, profileText: profileText,
    open: function (id, judge, scroll) { openConversation(id, judge, scroll); },
    refillPicker: function () { if (refillPicker) refillPicker(); }, accept: null };

  /* ------------------------------------------------------------ drilldown */
  var dd = { page: 0, rows: [] };
  function drilldownRows() {
    var q = (document.getElementById("dd-filter").value || "").toLowerCase();
    var ph = document.getElementById("dd-phenotype").value;
    var pids = Object.keys(IE.profiles).sort();
    return pids.filter(function (pid) {
      var p = IE.profiles[pid];
      if (ph && p[0] !== ph) return false;
      if (!q) return true;
      return profileText(pid).indexOf(q) >= 0;
    });
  }
  var convsByProfile = {};
  IE.convs.forEach(function (c) { (convsByProfile[c[3]] = convsByProfile[c[3]] || []).push(c); });
  function chips(conv, hidden) {
    var codes = conv[5] || "";
    var box = el("span", { cls: "chips", title: conv[0] + (conv[4] !== "ok" ? " (" + conv[4] + ")" : ""),
      "data-conv": conv[0], onclick: function () { openConversation(conv[0]); } });
    if (conv[4] !== "ok") { box.appendChild(el("span", { cls: "badge fail", text: conv[4] })); return box; }
    if (!codes) { box.appendChild(el("span", { cls: "badge", text: "not judged" })); return box; }
    var bled = (IE.bled || {})[conv[0]] || "";
    hidden.forEach(function (d, i) {
      var o = OUT[codes[i]] || OUT["0"];
      /* a domain that bled and was caught later (or asked later) counts as bleed too: mark it */
      var extra = bled[i] === "1" && o[0] !== "bleed";
      box.appendChild(el("span", { cls: "chip " + o[0] + (extra ? " bled" : ""),
        title: label(d) + ": " + o[2] + (extra ? "; also bled (disclosed without ask at some turn)" : ""),
        text: o[1] + (extra ? "!" : "") }));
    });
    return box;
  }
  function renderDrilldown() {
    var body = document.getElementById("dd-body");
    if (!body) return;
    dd.rows = drilldownRows();
    var pages = Math.max(1, Math.ceil(dd.rows.length / PAGE));
    dd.page = Math.min(dd.page, pages - 1);
    body.textContent = "";
    dd.rows.slice(dd.page * PAGE, dd.page * PAGE + PAGE).forEach(function (pid) {
      var p = IE.profiles[pid];
      var tr = el("tr", {}, [
        el("td", { cls: "l" }, [el("b", { text: pid }), el("span", { cls: "sub", text: p[3] })]),
        el("td", { cls: "l", title: p[0] }, [phenotypeName(p[0]), p[1] ? el("span", { cls: "badge " + p[1], text: p[1] }) : null,
          el("span", { cls: "sub", text: p[2].map(label).join(" \u00b7 ") })])
      ]);
      IE.arms.forEach(function (arm, ai) {
        var td = el("td", { cls: "l" });
        (convsByProfile[pid] || []).filter(function (c) { return c[2] === ai; })
          .sort(function (a, b) { return a[6] - b[6]; })
          .forEach(function (c) { td.appendChild(chips(c, p[2])); td.appendChild(el("br")); });
        if (!td.childNodes.length) td.appendChild(el("span", { cls: "empty", text: "\u2013" }));
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    document.getElementById("dd-count").textContent = dd.rows.length + " profiles \u00b7 page " + (dd.page + 1) + " of " + pages;
  }

  /* ------------------------------------------------------------ transcript viewer */
  function showMessage(text) {
    var box = document.getElementById("viewer-body");
    box.textContent = "";
    box.appendChild(el("p", { cls: "empty", text: text }));
  }
  function openConversation(id, judge, scroll) {
    var entry = byId[id];
    if (!entry) { showMessage("Unknown conversation " + id); return; }
    if (judge) state.judge = judge;
    state.cell = null;
    if (scroll !== false) document.getElementById("transcript").scrollIntoView();
    syncPicker(entry);
    withShard(entry[1], function (data) { state.conv = data[id]; renderConversation(); });
  }
  function cellClass(lab) {
    if (!lab) return ["nolabel", "", "no label from this judge"];
    if (lab[0] && lab[1]) return ["active", "\u2713", "active discovery: asked + disclosed"];
    if (lab[0]) return ["asked", "?", "asked, not disclosed"];
    if (lab[1]) return ["bleed", "!", "bleed: disclosed without being asked"];
    return ["empty", "", "nothing on this turn"];
  }
  function selectCell(turn, domain, node) {
    var prev = document.querySelector(".cell.sel");
    if (prev) prev.classList.remove("sel");
    if (node) node.classList.add("sel");
    state.cell = [turn, domain];
    renderPanel();
  }
  function indexTurns(j) {
    var map = {};
    if (j) j.turns.forEach(function (t) { map[t.t] = t; });
    return map;
  }
  function outcomeSummary(conv) {
    /* What this judge's labels add up to, per hidden domain (same rules as the drill-down squares). */
    var j = conv.judges[state.judge], wrap = el("span", { cls: "summary" });
    if (!j || j.status !== "ok") return wrap;
    var caught = 0;
    conv.hidden.forEach(function (d) {
      var a = false, b = false, q = false;
      j.turns.forEach(function (t) { var l = t.d[d]; if (!l) return; if (l[0] && l[1]) a = true; else if (l[1]) b = true; if (l[0]) q = true; });
      var code = a ? "3" : b ? "2" : q ? "1" : "0", extra = b && code !== "2";
      if (a) caught += 1;
      wrap.appendChild(el("span", { cls: "chip " + OUT[code][0] + (extra ? " bled" : ""),
        title: label(d) + ": " + OUT[code][2] + (extra ? "; also bled (disclosed without ask at some turn)" : ""),
        text: OUT[code][1] + (extra ? "!" : "") }));
      wrap.appendChild(el("span", { cls: "qt", text: " " + label(d) + "  " }));
    });
    wrap.insertBefore(el("b", { text: caught + " of " + conv.hidden.length + " hidden domains surfaced \u00b7 " }), wrap.firstChild);
    return wrap;
  }
  function judgeTurns() {
    var j = state.conv.judges[state.judge];
    var map = {};
    if (j) j.turns.forEach(function (t) { map[t.t] = t; });
    return map;
  }
  function renderPanel() {
    var panel = document.getElementById("panel");
    panel.textContent = "";
    var j = state.conv && state.conv.judges[state.judge];
    if (!state.cell || !j) {
      panel.appendChild(el("h4", { text: "Judge reasoning" }));
      panel.appendChild(el("p", { cls: "empty", text: j ? "Click a cell to see this judge's reasoning for that turn and domain."
        : "This conversation has no judgment from " + (state.judge || "any judge") + "." }));
      if (j && j.status !== "ok") panel.appendChild(el("p", { text: "Judge status: " + j.status + (j.errors.length ? " \u2014 " + j.errors.join("; ") : "") }));
      return;
    }
    var t = judgeTurns()[state.cell[0]] || { d: {}, q: "", r: "" };
    var lab = t.d[state.cell[1]];
    var c = cellClass(lab);
    panel.appendChild(el("h4", { text: "Turn " + state.cell[0] + " \u00b7 " + label(state.cell[1]) }));
    panel.appendChild(el("div", {}, [el("span", { cls: "sw " + (c[0] === "empty" ? "missed" : c[0]) }), c[2]]));
    panel.appendChild(el("div", { cls: "qt", text: "judge: " + state.judge + " \u00b7 question type: " + (t.q || "\u2013").replace(/_/g, " ")
      + (t.f === 0 ? " \u00b7 patient broke the disclosure rule" : "") }));
    panel.appendChild(el("div", { cls: "why", id: "panel-reasoning", text: lab && lab[2] ? lab[2] : (t.r || "(the judge gave no reasoning)") }));
  }
  function renderConversation() {
    var conv = state.conv, box = document.getElementById("viewer-body");
    if (!conv.judges[state.judge]) state.judge = IE.judges.filter(function (j) { return conv.judges[j]; })[0] || state.judge;
    box.textContent = "";
    var head = el("div", { cls: "vhead" }, [
      el("h3", { text: conv.clinician + " \u00b7 " + conv.profile_id }),
      el("span", { title: conv.phenotype }, [phenotypeName(conv.phenotype), conv.alignment ? el("span", { cls: "badge " + conv.alignment, text: conv.alignment }) : null]),
      el("span", { cls: "qt", text: [conv.who, "presenting: " + conv.presenting, conv.condition, conv.patient_mode + " patient", "trial " + conv.trial].filter(Boolean).join(" \u00b7 ") }),
      conv.status !== "ok" ? el("span", { cls: "badge fail", text: conv.status + (conv.error ? ": " + conv.error : "") }) : null
    ]);
    box.appendChild(head);
    var tabs = el("div", { cls: "tabs", id: "judge-tabs" });
    IE.judges.forEach(function (j) {
      var jd = conv.judges[j];
      tabs.appendChild(el("button", { cls: j === state.judge ? "on" : "", "data-judge": j, disabled: jd ? null : "disabled",
        title: jd ? (jd.model || j) + " \u00b7 " + jd.status : "not judged by " + j,
        onclick: function () { state.judge = j; state.cell = null; location.hash = "c=" + conv.id + "&j=" + encodeURIComponent(j); renderConversation(); } },
        [j + (jd ? (jd.status === "ok" ? "" : " (" + jd.status + ")") : " (none)")]));
    });
    box.appendChild(el("div", { cls: "controls" }, [el("span", { cls: "qt", text: "judge:" }), tabs, outcomeSummary(conv)]));
    var turns = judgeTurns();
    var others = IE.judges.filter(function (j) { return j !== state.judge && conv.judges[j] && conv.judges[j].status === "ok"; });
    var otherTurns = others.length ? indexTurns(conv.judges[others[0]]) : null;
    var table = el("table", { cls: "turns" });
    var hr = el("tr", {}, [el("th"), el("th", { cls: "l", text: "" })]);
    conv.hidden.forEach(function (d) { hr.appendChild(el("th", { cls: "dom", title: d, text: conv.labels[d] || label(d) })); });
    table.appendChild(el("thead", {}, [hr]));
    var body = el("tbody");
    var rows = [{ t: 0, c: null, p: conv.opening }].concat(conv.turns);
    function cutNote(row, role) {  // an answer cut at the token cap is kept, and says so
      return row.x && row.x.indexOf(role) >= 0 ? el("span", { cls: "qt", text: " [cut at the token cap]" }) : null;
    }
    rows.forEach(function (row) {
      var jt = turns[row.t];
      var tr = el("tr", { cls: (jt ? "q-" + jt.q : "") + (jt && jt.f === 0 ? " leak" : ""), "data-turn": row.t });
      var text = el("td", {}, [
        row.c !== null ? el("p", { cls: "utt" }, [el("b", { text: "clinician" }), row.c, cutNote(row, "clinician")]) : null,
        el("p", { cls: "utt pat" }, [el("b", { text: row.t === 0 ? "patient (opening)" : "patient" }), row.p, cutNote(row, "patient")]),
        jt ? el("span", { cls: "qt", text: (row.t === 0 ? "opening" : jt.q.replace(/_/g, " ")) + (jt.f === 0 ? " \u00b7 leak: patient volunteered hidden information" : "") }) : null
      ]);
      tr.appendChild(el("td", { cls: "tn", text: String(row.t) }));
      tr.appendChild(text);
      conv.hidden.forEach(function (d) {
        var lab = jt ? jt.d[d] : null;
        var c = cellClass(jt ? lab : null);
        var ot = otherTurns && otherTurns[row.t] ? otherTurns[row.t].d[d] : null;
        var differs = lab && ot && (lab[0] !== ot[0] || lab[1] !== ot[1]);
        var cell = el("span", { cls: "cell " + c[0] + (differs ? " differs" : ""), text: c[1],
          title: "turn " + row.t + " \u00b7 " + label(d) + ": " + c[2] + (differs ? " (" + others[0] + " labels this cell differently)" : ""),
          "data-turn": row.t, "data-domain": d, role: "button", tabindex: "0" });
        cell.addEventListener("click", function () { selectCell(row.t, d, cell); });
        cell.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); selectCell(row.t, d, cell); } });
        tr.appendChild(el("td", { cls: "cellwrap" }, [cell]));
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    box.appendChild(el("div", { cls: "vgrid" }, [el("div", { cls: "scroll" }, [table]), el("aside", { cls: "panel", id: "panel" })]));
    var formulation = formulationBlock(conv);
    if (formulation) box.appendChild(formulation);
    renderPanel();
  }

  /* ------------------------------------------------------------ post-intake formulation */
  function diagnosisVerdict(conv, f, domain) {
    /* [css class, text]: where the diagnosis lands against this profile, under the selected judge. */
    if (!domain) return ["fx-none", "not mapped to a catalog domain"];
    if (conv.hidden.indexOf(domain) >= 0) {
      var unearned = f.u ? f.u[state.judge] : undefined;
      if (unearned === undefined) return ["fx-hit", "hidden domain of this profile (hit); surfacing not scored by " + (state.judge || "a judge")];
      if (unearned.indexOf(domain) >= 0) return ["fx-unearned", "hidden domain (hit), unearned: never actively surfaced in the interview"];
      return ["fx-hit", "hidden domain (hit), actively surfaced in the interview"];
    }
    if (domain === conv.presenting_domain) return ["fx-presenting", "the presenting concern"];
    return ["fx-other", "not a domain of this profile"];
  }
  function formulationBlock(conv) {
    var f = conv.formulation;
    if (!f) return null;
    var box = el("div", { cls: "formulation", id: "formulation" }, [
      el("h4", {}, ["Post-intake formulation", el("span", { cls: "badge", text: "not shown to the patient" }),
        f.rep ? el("span", { cls: "badge", text: "repaired once" }) : null])]);
    if (f.s !== "ok") {
      box.appendChild(el("p", {}, [el("span", { cls: "badge fail", text: f.s }), " " + (f.e || "")]));
      if (f.a) box.appendChild(el("div", { cls: "why", text: "answer: " + f.a }));
      return box;
    }
    box.appendChild(el("p", {}, [el("b", { text: "Chief complaint: " }), f.cc]));
    if (f.pr.length) box.appendChild(el("p", {}, [el("b", { text: "Problems: " }), f.pr.join(" \u00b7 ")]));
    var rows = f.dx.map(function (d) {
      var verdict = diagnosisVerdict(conv, f, d[3]);
      return el("tr", { cls: verdict[0], "data-domain": d[3] || "" }, [
        el("td", { cls: "l", text: d[0] === "principal" ? "principal" : "differential" }),
        el("td", { cls: "l" }, [d[1], d[2] ? el("span", { cls: "qt", text: " ICD-10 " + d[2] }) : null]),
        el("td", { cls: "l" }, [d[3] ? label(d[3]) : "\u2013", d[4] ? el("span", { cls: "qt", text: " (" + d[4] + ")" }) : null]),
        el("td", { cls: "l", text: verdict[1] })]);
    });
    box.appendChild(el("table", { cls: "data fx" }, [
      el("thead", {}, [el("tr", {}, ["", "diagnosis", "catalog domain (how mapped)", "in this profile"].map(function (h) { return el("th", { cls: "l", text: h }); }))]),
      el("tbody", {}, rows)]));
    if (f.core) box.appendChild(el("p", { cls: "qt", id: "formulation-core", text: "Principal diagnosis " + (f.hit ? "matches" : "does not match")
      + " the phenotype's diagnostic core (" + label(f.core) + ")." }));
    box.appendChild(el("p", {}, [el("b", { text: "Risk: " }), el("span", { cls: "badge risk-" + f.risk, text: f.risk }), " " + f.ev]));
    return box;
  }

  /* ------------------------------------------------------------ picker */
  var refillPicker = null;
  function syncPicker(entry) {
    var arm = document.getElementById("pick-arm"), conv = document.getElementById("pick-conv");
    if (!arm || !refillPicker) return;
    if (arm.value !== String(entry[2])) { arm.value = String(entry[2]); refillPicker(); }
    conv.value = entry[0];
  }
  function fillPicker() {
    var arm = document.getElementById("pick-arm"), conv = document.getElementById("pick-conv");
    if (!arm) return;
    IE.arms.forEach(function (a, i) { arm.appendChild(el("option", { value: String(i), text: a.label })); });
    function refill() {
      conv.textContent = "";
      var accept = VIEW.accept || function () { return true; };
      IE.convs.filter(function (c) { return String(c[2]) === arm.value && accept(c); }).forEach(function (c) {
        conv.appendChild(el("option", { value: c[0], text: c[3] + " \u00b7 " + phenotypeName((IE.profiles[c[3]] || [c[3]])[0]) + " \u00b7 t" + c[6] + " \u00b7 " + (c[4] === "ok" ? pct(c[7]) : c[4]) }));
      });
    }
    refillPicker = refill;
    arm.addEventListener("change", function () { refill(); if (conv.value) openConversation(conv.value, null, false); });
    conv.addEventListener("change", function () { openConversation(conv.value, null, false); });
    refill();
  }

  function fromHash() {
    var m = /^#c=([^&]+)(?:&j=([^&]+))?/.exec(location.hash);
    if (m) { openConversation(decodeURIComponent(m[1]), m[2] ? decodeURIComponent(m[2]) : null); return true; }
    return false;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var f = document.getElementById("dd-filter");
    if (f) {
      f.addEventListener("input", function () { dd.page = 0; renderDrilldown(); });
      document.getElementById("dd-phenotype").addEventListener("change", function () { dd.page = 0; renderDrilldown(); });
      document.getElementById("dd-prev").addEventListener("click", function () { dd.page = Math.max(0, dd.page - 1); renderDrilldown(); });
      document.getElementById("dd-next").addEventListener("click", function () { dd.page += 1; renderDrilldown(); });
      renderDrilldown();
    }
    document.querySelectorAll("a[data-conv]").forEach(function (a) {
      a.addEventListener("click", function (e) { e.preventDefault(); openConversation(a.getAttribute("data-conv"), a.getAttribute("data-judge")); });
    });
    fillPicker();
    if (VIEW.ready) VIEW.ready();
    if (!fromHash() && !(VIEW.fromUrl && VIEW.fromUrl()) && IE.start) openConversation(IE.start, null, false);
  });
})();
