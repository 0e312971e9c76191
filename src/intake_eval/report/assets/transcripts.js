/* intake-eval report: the transcript viewer's filter and search, and the sticky nav's height.
   A matrix cell links to "#transcript?clinician=…&phenotype=…&scored=1" (report/cell_links.py); the
   same query after "index.html?" works from other pages. The viewer lists only the matching
   conversations, says which filter is active and clears it on request. Search matches what the page
   shows (clinician labels, phenotype names, domain labels) as well as the ids. */
(function () {
  "use strict";
  var IE = window.IE_DATA, VIEW = window.IE_VIEW;
  var KEYS = ["clinician", "condition", "patient_mode", "phenotype", "domain", "alignment", "profile", "scored"];
  var SHOWN = 200;  // list entries drawn at once; the count always covers every match
  var state = { filter: {}, query: "", matches: [] };

  function parseQuery(text) {
    var filter = {};
    new URLSearchParams(text).forEach(function (value, key) { if (KEYS.indexOf(key) >= 0 && value) filter[key] = value; });
    return filter;
  }
  function hashQuery() {
    var m = /^#transcript\?(.*)$/.exec(location.hash);
    return m ? m[1] : null;
  }
  function armOf(c) { return IE.arms[c[2]] || {}; }
  function profileOf(c) { return IE.profiles[c[3]] || ["", "", [], ""]; }
  function scored(c) { return c[4] === "ok" && !!c[5]; }

  function matchesFilter(c, f) {
    var arm = armOf(c), p = profileOf(c);
    if (f.clinician && arm.clinician !== f.clinician) return false;
    if (f.condition && arm.condition !== f.condition) return false;
    if (f.patient_mode && arm.mode !== f.patient_mode) return false;
    if (f.phenotype && p[0] !== f.phenotype) return false;
    if (f.alignment && p[1] !== f.alignment) return false;
    if (f.domain && p[2].indexOf(f.domain) < 0) return false;
    if (f.profile && c[3] !== f.profile) return false;
    if (f.scored && !scored(c)) return false;
    return true;
  }
  var textCache = {};
  function convText(c) {
    if (textCache[c[0]] === undefined) {
      var arm = armOf(c);
      textCache[c[0]] = [c[0], arm.label, arm.clinician, arm.condition, arm.mode, c[4]].join(" ").toLowerCase()
        + " " + VIEW.profileText(c[3]);
    }
    return textCache[c[0]];
  }
  function matchesQuery(c, terms) {
    var text = convText(c);
    return terms.every(function (t) { return text.indexOf(t) >= 0; });
  }
  function active() { return Object.keys(state.filter).length > 0 || state.query !== ""; }

  function describe(f) {
    var parts = [];
    if (f.clinician) parts.push(["clinician", f.clinician]);
    if (f.condition) parts.push(["condition", f.condition]);
    if (f.patient_mode) parts.push(["patient", f.patient_mode]);
    if (f.phenotype) parts.push(["phenotype", VIEW.phenotypeName(f.phenotype)]);
    if (f.domain) parts.push(["hidden domain", VIEW.label(f.domain)]);
    if (f.alignment) parts.push(["presentation", f.alignment]);
    if (f.profile) parts.push(["profile", f.profile]);
    if (f.scored) parts.push(["scored by", IE.primary || "the primary judge"]);
    if (state.query) parts.push(["search", "\u201c" + state.query + "\u201d"]);
    return parts;
  }

  function render() {
    var bar = document.getElementById("tv-filter"), list = document.getElementById("tv-list");
    if (!bar || !list) return;
    var terms = state.query.toLowerCase().split(/\s+/).filter(Boolean);
    state.matches = active() ? IE.convs.filter(function (c) { return matchesFilter(c, state.filter) && matchesQuery(c, terms); }) : [];
    var chosen = {};
    state.matches.forEach(function (c) { chosen[c[0]] = true; });
    VIEW.accept = active() ? function (c) { return chosen[c[0]] === true; } : null;
    VIEW.refillPicker();
    bar.hidden = list.hidden = !active();
    list.textContent = "";
    var count = document.getElementById("tv-count");
    count.textContent = state.matches.length + (state.matches.length === 1 ? " transcript" : " transcripts");
    count.setAttribute("data-count", String(state.matches.length));
    var where = document.getElementById("tv-active");
    where.textContent = "";
    describe(state.filter).forEach(function (part) {
      where.appendChild(VIEW.el("span", { cls: "badge filter-key" }, [part[0] + ": ", VIEW.el("b", { text: part[1] })]));
    });
    if (!active()) return;
    if (!state.matches.length) list.appendChild(VIEW.el("p", { cls: "empty", text: "No transcript matches." }));
    state.matches.slice(0, SHOWN).forEach(function (c) {
      var p = profileOf(c), arm = armOf(c);
      list.appendChild(VIEW.el("a", { cls: "conv-link", href: "#c=" + encodeURIComponent(c[0]), "data-conv": c[0],
        title: c[0], onclick: function (e) { e.preventDefault(); VIEW.open(c[0], null, false); mark(c[0]); } }, [
        VIEW.el("b", { text: c[3] }), " " + VIEW.phenotypeName(p[0]) + " \u00b7 " + arm.label + (c[6] ? " \u00b7 trial " + c[6] : ""),
        VIEW.el("span", { cls: "qt", text: " " + (c[4] === "ok" ? VIEW.pct(c[7]) : c[4]) })]));
    });
    if (state.matches.length > SHOWN) {
      list.appendChild(VIEW.el("p", { cls: "qt", text: (state.matches.length - SHOWN) + " more: narrow the search to see them." }));
    }
  }
  function mark(id) {
    document.querySelectorAll("#tv-list .conv-link").forEach(function (a) {
      a.classList.toggle("on", a.getAttribute("data-conv") === id);
    });
  }
  function openFirst(scroll) {
    if (!state.matches.length) return false;
    var current = (document.getElementById("pick-conv") || {}).value;
    var keep = state.matches.some(function (c) { return c[0] === current; });
    var id = keep ? current : state.matches[0][0];
    VIEW.open(id, null, false);
    mark(id);
    if (scroll) document.getElementById("transcript").scrollIntoView();
    return true;
  }
  function apply(filter, scroll) {
    state.filter = filter;
    state.query = "";  // a cell's link shows exactly that cell
    var box = document.getElementById("tv-search");
    if (box) box.value = "";
    render();
    return openFirst(scroll) || active();
  }
  function clear() {
    state.filter = {};
    state.query = "";
    var box = document.getElementById("tv-search");
    if (box) box.value = "";
    if (history.replaceState) history.replaceState(null, "", location.pathname + "#transcript");
    render();
  }

  VIEW.fromUrl = function () {
    var text = hashQuery();
    if (text === null && location.search.length > 1) text = location.search.slice(1);
    if (text === null) return false;
    return apply(parseQuery(text), true);
  };
  VIEW.ready = function () {
    var box = document.getElementById("tv-search"), timer = null;
    if (box) box.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.query = box.value.trim(); render(); openFirst(false); }, 120);
    });
    var button = document.getElementById("tv-clear");
    if (button) button.addEventListener("click", clear);
    window.addEventListener("hashchange", function () {
      var text = hashQuery();
      if (text !== null) apply(parseQuery(text), true);
    });
    document.addEventListener("click", function (e) {  // the same link again changes no hash: apply it anyway
      var link = e.target.closest ? e.target.closest("a") : null;
      var href = link ? link.getAttribute("href") || link.getAttribute("xlink:href") : null;
      if (href && href === location.hash && hashQuery() !== null) apply(parseQuery(hashQuery()), true);
    });
    navHeight();
    window.addEventListener("resize", navHeight);
    currentSection();
  };

  /* The nav wraps onto more lines as sections are added; sticky panels and anchored sections keep clear of it. */
  function navHeight() {
    var nav = document.getElementById("toc");
    if (nav) document.documentElement.style.setProperty("--nav-h", nav.offsetHeight + "px");
  }
  /* The nav marks the section being read. */
  function currentSection() {
    var links = {}, nav = document.getElementById("toc");
    if (!nav || !window.IntersectionObserver) return;
    nav.querySelectorAll("a[href^='#']").forEach(function (a) { links[a.getAttribute("href").slice(1)] = a; });
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        var link = links[entry.target.id];
        if (!link || !entry.isIntersecting) return;
        nav.querySelectorAll("a.on").forEach(function (a) { a.classList.remove("on"); });
        link.classList.add("on");
      });
    }, { rootMargin: "-" + (nav.offsetHeight + 10) + "px 0px -60% 0px" });
    Object.keys(links).forEach(function (id) { var node = document.getElementById(id); if (node) seen.observe(node); });
  }
})();
