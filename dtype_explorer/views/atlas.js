// The atlas site's script (views/_atlas.py inlines it into every page; no CDN, no server).
// It reads the page's data (<script id="ax-data" type="application/json">), wires the search
// box, and draws a cell's detail (each run's cast path, error, trace summary, versions) when
// a heatmap cell is chosen. Every fact it shows was computed in Python (records/_atlas.py).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("ax-data").textContent);
  var palette = data.palette;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "style") node.setAttribute("style", attrs[k]);
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c != null) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    });
    return node;
  }
  function chip(dtype) {
    var color = (data.colors && data.colors[dtype]) || palette.ui.error;
    return el("span", { "class": "ax-chip", style: "background:" + color, text: dtype });
  }
  function badge(verdict) {
    return el("span", { "class": "ax-badge", style: "background:" + (palette.verdicts[verdict] || "#757575"), text: verdict });
  }

  // search: every page lists every target (name, page, class counts)
  var input = document.getElementById("ax-search");
  var hits = document.getElementById("ax-hits");
  function matches(query) {
    var q = query.trim().toLowerCase();
    if (!q) return [];
    return data.targets.filter(function (t) { return t.name.toLowerCase().indexOf(q) >= 0; });
  }
  if (input) {
    input.addEventListener("input", function () {
      var found = matches(input.value);
      hits.replaceChildren.apply(hits, found.slice(0, 40).map(function (t) {
        return el("li", {}, [el("a", { href: data.base + t.href, "data-testid": "search-hit" }, [t.name])]);
      }));
      document.querySelectorAll("tr[data-target]").forEach(function (row) {
        var q = input.value.trim().toLowerCase();
        row.hidden = q !== "" && row.getAttribute("data-target").toLowerCase().indexOf(q) < 0;
      });
    });
    input.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") return;
      var found = matches(input.value);
      if (found.length) window.location.href = data.base + found[0].href;
    });
  }

  // a target page: the cell's detail
  var detail = document.getElementById("ax-detail");
  if (!detail || !data.cells) return;

  function step(s) {
    var label = s.stage + (s.name ? " " + s.name : (s.index != null && s.index > 0 ? " " + s.index : ""));
    return el("span", { "class": "ax-step" + (s.changed ? " ax-changed" : ""), title: s.note || "", "data-stage": s.stage },
      [chip(s.dtype), el("small", { text: label })]);
  }
  function castPath(run) {
    var parts = [];
    (run.cast_path || []).forEach(function (s, i) {
      if (i) parts.push(el("span", { "class": "ax-arrow", text: "\u2192" }));
      parts.push(step(s));
    });
    if (run.status !== "ok") {
      if (parts.length) parts.push(el("span", { "class": "ax-arrow", text: "\u2192" }));
      parts.push(el("span", { "class": "ax-chip", style: "background:" + palette.ui.error, text: run.outcome }));
    }
    return el("div", { "class": "ax-path", "data-testid": "cast-path" }, parts);
  }
  function showRun(name, run) {
    var backend = name.split("/")[0];
    var versions = data.versions[backend] || {};
    var notes = (run.cast_path || []).filter(function (s) { return s.changed && s.note; })
      .map(function (s) { return el("div", { "class": "ax-note", text: s.stage + (s.name ? " " + s.name : "") + ": " + s.note }); });
    var trace = run.trace_ops ? el("div", { "class": "ax-note", "data-testid": "trace-summary" }, [
      "op trace: " + run.trace_ops + " ops",
      run.first_change ? "; first dtype change at " + run.first_change + (run.first_change_note ? " (" + run.first_change_note + ")" : "") + (run.first_change_at ? " " + run.first_change_at : "") : "",
      run.first_nonfinite ? "; first inf/NaN at " + run.first_nonfinite : ""
    ]) : null;
    return el("section", { "class": "ax-run", "data-testid": "run", "data-run": name }, [
      el("div", { "class": "ax-run-head" }, [
        el("strong", { text: name }), chip(run.status === "ok" ? run.output_dtype : run.outcome), badge(run.verdict),
        el("span", { "class": "ax-muted", text: "documented " + (run.documented_dtype || "\u2014") + " \u00b7 declared " + (run.declared_dtype || "\u2014") + " \u00b7 " + run.classification })
      ]),
      castPath(run),
      el("div", {}, notes),
      run.error_type ? el("pre", { "class": "ax-error", "data-testid": "error" }, [run.error_type + " (in " + run.error_where + "): " + (run.error_message || "")]) : null,
      trace,
      el("div", { "class": "ax-note", "data-testid": "versions" }, [
        "device " + run.device + " \u00b7 " + Object.keys(versions).map(function (k) { return k + " " + versions[k]; }).join(", ")
      ])
    ]);
  }
  function show(index) {
    var cell = data.cells[index];
    document.querySelectorAll(".ax-chosen").forEach(function (c) { c.classList.remove("ax-chosen"); });
    document.querySelectorAll('[data-cell="' + index + '"]').forEach(function (c) { c.classList.add("ax-chosen"); });
    detail.replaceChildren(
      el("h2", { "data-testid": "detail-title", text: data.target + " on " + cell.input_dtype + " under " + cell.policy + " (compute " + cell.compute_dtype + "): " + cell.classification }),
      el("div", {}, Object.keys(cell.runs).map(function (name) { return showRun(name, cell.runs[name]); }))
    );
    if (window.location.hash !== "#" + cell.input_dtype + "/" + cell.policy) history.replaceState(null, "", "#" + cell.input_dtype + "/" + cell.policy);
  }
  document.querySelectorAll("td[data-cell]").forEach(function (td) {
    td.addEventListener("click", function () { show(Number(td.getAttribute("data-cell"))); });
  });
  var wanted = decodeURIComponent(window.location.hash.slice(1)).split("/");
  data.cells.forEach(function (cell, i) {
    if (cell.input_dtype === wanted[0] && cell.policy === wanted[1]) show(i);
  });
})();
