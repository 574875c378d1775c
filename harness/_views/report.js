// The report's table and panels. Data comes from the JSON block #report-data; panels are HTML
// already escaped by harness.html, embedded gzip-compressed (data.packed), inflated in the
// background once the table is drawn, and inserted only when opened.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var app = document.getElementById("app");
  var panel = document.getElementById("panel");
  var PAGE = 100;
  var panelsLoaded = false, panelsReady = null;  // set once the table is drawn (loadPanels)

  function inflate(base64) {  // gzip + base64 -> the JSON list of panel HTML strings
    var binary = atob(base64), bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function loadPanels() {
    return Promise.all(Object.keys(data.packed).map(function (name) {
      return inflate(data.packed[name]).then(function (list) { data[name] = list; });
    })).then(function () {
      panelsLoaded = true;
      document.body.setAttribute("data-panels", "1");
    });
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "NaN";
    if (typeof v === "string") return v;  // "not run": the node did not run (NaN is unscored)
    return String(Number(v.toPrecision(4)));
  }
  function escapeHtml(s) {  // as Python's html.escape(quote=True), to search escaped panels
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
  }
  function compare(a, b) {  // nulls (unscored) sort first: they are what a reader must see
    if (a === b) return 0;
    if (a === null || a === undefined) return -1;
    if (b === null || b === undefined) return 1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }
  var textCache = {};
  function panelText(key, html) {
    if (!(key in textCache)) textCache[key] = html.replace(/<[^>]*>/g, " ").toLowerCase();
    return textCache[key];
  }

  // A sortable, filterable, paged table over `items`; `columns` give header, value and cell.
  function Table(opts) {
    this.opts = opts;
    this.sortCol = opts.sortCol; this.sortDir = opts.sortDir || 1;
    this.page = 0; this.view = opts.items.slice(); this.openKey = null;
    this.build();
    this.refresh();
  }
  Table.prototype.build = function () {
    var self = this, o = this.opts;
    this.controls = el("div", {"class": "controls"});
    this.search = el("input", {type: "search", id: "q", placeholder: "search text"});
    this.controls.appendChild(this.search);
    (o.filters || []).forEach(function (f) {
      var select = el("select", {id: f.id, title: f.title});
      f.options.forEach(function (opt) { select.appendChild(el("option", {value: opt[0]}, opt[1])); });
      self.controls.appendChild(select);
      select.addEventListener("change", function () { self.page = 0; self.refresh(); });
      f.node = select;
    });
    if (o.ranged) {
      this.rangeCol = el("select", {id: "range-col", title: "column to filter by value"});
      o.columns.forEach(function (c, i) {
        if (c.numeric) self.rangeCol.appendChild(el("option", {value: String(i)}, c.title));
      });
      this.lo = el("input", {type: "number", id: "lo", step: "any", placeholder: "min"});
      this.hi = el("input", {type: "number", id: "hi", step: "any", placeholder: "max"});
      [this.rangeCol, this.lo, this.hi].forEach(function (n) {
        self.controls.appendChild(n);
        n.addEventListener("input", function () { self.page = 0; self.refresh(); });
      });
    }
    this.count = el("span", {"class": "muted", id: "count"});
    this.controls.appendChild(this.count);
    var timer = null;
    this.search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { self.page = 0; self.refresh(); }, 150);
    });
    this.table = el("table", {id: "rows"});
    var head = el("tr");
    o.columns.forEach(function (c, i) {
      var th = el("th", {"class": c.numeric ? "num" : "", "data-col": String(i)}, c.title);
      th.addEventListener("click", function () {
        if (self.sortCol === i) self.sortDir = -self.sortDir; else { self.sortCol = i; self.sortDir = 1; }
        self.refresh();
      });
      head.appendChild(th);
    });
    var thead = el("thead"); thead.appendChild(head); this.table.appendChild(thead);
    this.body = el("tbody"); this.table.appendChild(this.body);
    this.pager = el("div", {"class": "pager"});
    this.prev = el("button", {id: "prev"}, "‹ prev"); this.next = el("button", {id: "next"}, "next ›");
    this.pageInfo = el("span", {"class": "muted"});
    [this.prev, this.pageInfo, this.next].forEach(function (n) { self.pager.appendChild(n); });
    this.prev.addEventListener("click", function () { self.page = Math.max(0, self.page - 1); self.render(); });
    this.next.addEventListener("click", function () { self.page += 1; self.render(); });
    app.appendChild(this.controls); app.appendChild(this.table); app.appendChild(this.pager);
  };
  Table.prototype.refresh = function () {
    var o = this.opts, self = this;
    var query = this.search.value.trim().toLowerCase();
    var needle = query ? escapeHtml(query) : "";
    if (needle && !panelsLoaded) {  // the text lives in the panels: search once they are inflated
      this.count.textContent = "loading transcripts to search…";
      panelsReady.then(function () { self.refresh(); });
      return;
    }
    var col = this.rangeCol ? Number(this.rangeCol.value) : -1;
    var lo = this.lo && this.lo.value !== "" ? Number(this.lo.value) : null;
    var hi = this.hi && this.hi.value !== "" ? Number(this.hi.value) : null;
    this.view = o.items.filter(function (item) {
      for (var k = 0; k < (o.filters || []).length; k++) {
        var f = o.filters[k];
        if (f.node.value && !f.test(item, f.node.value)) return false;
      }
      if (col >= 0 && (lo !== null || hi !== null)) {
        var v = o.columns[col].value(item);
        if (typeof v !== "number") return false;
        if (lo !== null && v < lo) return false;
        if (hi !== null && v > hi) return false;
      }
      return !needle || o.text(item).indexOf(needle) >= 0 || o.key(item).toLowerCase().indexOf(query) >= 0;
    });
    if (this.sortCol !== undefined && this.sortCol !== null) {
      var c = o.columns[this.sortCol], dir = this.sortDir;
      this.view.sort(function (a, b) { return dir * compare(c.value(a), c.value(b)) || compare(o.key(a), o.key(b)); });
    }
    Array.prototype.forEach.call(this.table.querySelectorAll("th"), function (th, i) {
      th.className = (o.columns[i].numeric ? "num " : "") +
        (i === self.sortCol ? (self.sortDir > 0 ? "sorted-asc" : "sorted-desc") : "");
    });
    this.count.textContent = this.view.length + " of " + o.items.length + " " + o.noun;
    this.render();
  };
  Table.prototype.render = function () {
    var o = this.opts, self = this;
    var pages = Math.max(1, Math.ceil(this.view.length / PAGE));
    this.page = Math.min(this.page, pages - 1);
    var frag = document.createDocumentFragment();
    this.view.slice(this.page * PAGE, (this.page + 1) * PAGE).forEach(function (item) {
      var tr = el("tr", {"data-key": o.key(item)});
      if (o.key(item) === self.openKey) tr.className = "open";
      o.columns.forEach(function (c) {
        var td = el("td", {"class": (c.numeric ? "num " : "") + (c.cls || "")});
        c.cell(td, item);
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () {
        self.openKey = o.key(item);
        Array.prototype.forEach.call(self.body.querySelectorAll("tr.open"), function (r) { r.className = ""; });
        tr.className = "open";
        o.open(item);
      });
      frag.appendChild(tr);
    });
    this.body.textContent = "";
    this.body.appendChild(frag);
    this.pageInfo.textContent = "page " + (this.page + 1) + " of " + pages;
    this.prev.disabled = this.page === 0; this.next.disabled = this.page >= pages - 1;
  };

  function numCol(title, get) {
    return {title: title, numeric: true, value: get, cell: function (td, item) { td.textContent = fmt(get(item)); }};
  }
  function textCol(title, get, cls) {
    return {title: title, value: get, cls: cls, cell: function (td, item) {
      var v = get(item); td.textContent = v; if (cls === "err") td.title = v; }};
  }
  function showPanel(html) {
    panel.innerHTML = html;
    panel.scrollIntoView({block: "start"});
  }
  function whenLoaded(show) {  // open a panel now, or as soon as the panels are inflated
    return function (item) {
      if (panelsLoaded) { show(item); return; }
      panel.innerHTML = "<p class='muted'>loading transcripts…</p>";
      panelsReady.then(function () { show(item); });
    };
  }

  function runReport() {
    var stops = {}, rows = data.rows;
    rows.forEach(function (r) { stops[r[4]] = true; });
    var columns = [
      textCol("example", function (r) { return r[1]; }),
      numCol("rollout", function (r) { return r[2]; }),
      numCol("reward", function (r) { return r[3]; }),
    ];
    data.columns.forEach(function (path, k) {
      var col = numCol(path, function (r) { return r[8][k]; });
      columns.push(col);
    });
    columns.push(textCol("stop", function (r) { return r[4]; }));
    columns.push(numCol("turns", function (r) { return r[6]; }));
    columns.push(numCol("tokens", function (r) { return r[7]; }));
    columns.push(textCol("error", function (r) { return r[5]; }, "err"));
    new Table({
      items: rows, columns: columns, noun: "rollouts", ranged: true, sortCol: null,
      key: function (r) { return r[1] + ":" + r[2]; },
      text: function (r) { return panelText(r[0], data.panels[r[0]]); },
      filters: [
        {id: "stop", title: "stop reason", options: [["", "any stop reason"]].concat(
          Object.keys(stops).sort().map(function (s) { return [s, s || "(none)"]; })),
          test: function (r, v) { return r[4] === v; }},
        {id: "status", title: "errors and scoring", options: [["", "all rollouts"], ["error", "with an error"],
          ["ok", "without errors"], ["unscored", "unscored (NaN)"]],
          test: function (r, v) {
            return v === "error" ? !!r[5] : v === "ok" ? !r[5] : r[3] === null;
          }},
      ],
      open: whenLoaded(function (r) { showPanel(data.panels[r[0]]); }),
    });
  }

  function comparePanel(e) {
    var out = "<div class='head'>example " + escapeHtml(e[0]) + ": reward " + fmt(e[1]) + " → " + fmt(e[2]) + "</div>";
    if (e[4].length) {
      out += "<table class='flips'><tr><th>node</th><th class='num'>A</th><th class='num'>B</th><th></th></tr>";
      e[4].forEach(function (n) {
        out += "<tr class='" + (n[3] ? "flip" : "") + "'><td>" + escapeHtml(n[0]) + "</td><td class='num'>" +
          fmt(n[1]) + "</td><td class='num'>" + fmt(n[2]) + "</td><td>" + (n[3] ? "flipped" : "changed") + "</td></tr>";
      });
      out += "</table>";
    } else {
      out += "<p class='muted'>no node changed</p>";
    }
    var pairs = Math.max(e[5].length, e[6].length);
    for (var k = 0; k < pairs; k++) {
      out += "<div class='side'><div><div class='head'>A</div>" +
        (k < e[5].length ? data.panels_a[e[5][k]] : "<p class='muted'>no rollout</p>") +
        "</div><div><div class='head'>B</div>" +
        (k < e[6].length ? data.panels_b[e[6][k]] : "<p class='muted'>no rollout</p>") + "</div></div>";
    }
    showPanel(out);
  }

  function compareReport() {
    var abs = function (e) { return e[3] === null ? null : Math.abs(e[3]); };
    var columns = [
      textCol("example", function (e) { return e[0]; }),
      numCol("reward A", function (e) { return e[1]; }),
      numCol("reward B", function (e) { return e[2]; }),
      numCol("B − A", function (e) { return e[3]; }),
      numCol("|change|", abs),
      {title: "flipped nodes", value: function (e) { return e[4].filter(function (n) { return n[3]; }).length; },
        cell: function (td, e) {
          td.className = "flip";
          td.textContent = e[4].filter(function (n) { return n[3]; }).map(function (n) { return n[0]; }).join(", ");
        }},
    ];
    new Table({
      items: data.examples, columns: columns, noun: "examples", ranged: true, sortCol: 4, sortDir: -1,
      key: function (e) { return e[0]; },
      text: function (e) {
        return e[5].map(function (i) { return panelText("a" + i, data.panels_a[i]); }).join(" ") + " " +
          e[6].map(function (i) { return panelText("b" + i, data.panels_b[i]); }).join(" ");
      },
      filters: [{id: "flipped", title: "flipped nodes", options: [["", "all examples"],
        ["flipped", "with a flipped node"], ["changed", "reward changed"]],
        test: function (e, v) {
          return v === "flipped" ? e[4].some(function (n) { return n[3]; }) : e[3] !== null && e[3] !== 0;
        }}],
      open: whenLoaded(comparePanel),
    });
  }

  if (data.mode === "compare") compareReport(); else runReport();
  document.body.setAttribute("data-ready", "1");
  panelsReady = loadPanels();
  panelsReady.catch(function (err) {
    panel.textContent = "could not read the transcripts embedded in this report: " + err;
    console.error(err);
  });
})();
