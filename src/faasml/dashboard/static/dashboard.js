/* faasml dashboard: renders the run view the server computes from a run's record.
 * Every text from the record goes into the page as a text node (never as markup), so a
 * configuration value or an error message cannot inject HTML. Live: polls the JSON endpoint
 * every POLL_MS; static (faasml report --html): renders the view inlined in the page. */
(function () {
  "use strict";

  var POLL_MS = 2000;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var config = JSON.parse(document.getElementById("faasml-config").textContent);
  var app = document.getElementById("app");
  var live = document.getElementById("live");
  var shown = null;  // the JSON last rendered: the page is rebuilt only when it changes
  var charts = [];

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (attrs[key] !== null && attrs[key] !== undefined) {
        node.setAttribute(key, String(attrs[key]));
      }
    });
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) { return; }
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    });
    return node;
  }

  function table(id, head, rows) {
    var thead = el("thead", {}, [el("tr", {}, head.map(function (h) {
      return Array.isArray(h) ? el("th", {title: h[1]}, [h[0]]) : el("th", {}, [h]);
    }))]);
    return el("table", {id: id}, [thead, el("tbody", {}, rows)]);
  }

  function panel(id, title, children, wide) {
    return el("section", {id: id, "class": wide ? "panel wide" : "panel"},
              [el("h2", {}, [title])].concat(children));
  }

  function cell(value) { return value ? [value.time, el("br"), value.bill] : ["-"]; }

  function header(v) {
    var badge = el("span", {id: "run-status", "class": "status " + v.status}, [v.status]);
    var facts = [
      v.kind + " run", v.progress, "elapsed " + v.elapsed, v.constraint, v.platform,
      "ranked by " + v.metric_name + " (" + (v.mode === "max" ? "higher" : "lower") + " is better)"
    ];
    if (v.planner) { facts.push("planner " + v.planner + ", re-plans " + v.replans); }
    return el("section", {id: "run-header", "class": "panel wide"}, [
      el("h1", {}, [el("span", {id: "run-name"}, [v.name]), " ", badge]),
      el("p", {"class": "muted"}, ["run directory " + v.path]),
      el("p", {"class": "facts"}, [facts.join(" · ")]),
      el("pre", {id: "summary"}, [v.summary.join("\n")])
    ]);
  }

  function stagesPanel(v) {
    var head = ["stage", "state", "trials × epochs", "allocation",
                ["epoch planned", "the planner's time of one epoch"],
                ["epoch measured", "the mean of the stage's epochs as measured"],
                ["planned", "the planner's time and bill of the stage (its original plan)"],
                ["predicted", "the run's own prediction before it ran"],
                ["re-planned", "the run's prediction of the stage after a re-plan"],
                ["re-predicted", "the run's prediction after re-calibrating on stages measured"],
                ["measured", "the stage as it ran"]];
    var rows = v.stages.map(function (s) {
      var allocation = [s.allocation];
      if (s.planned_allocation) {
        allocation.push(el("div", {"class": "muted"}, ["planned on " + s.planned_allocation]));
      }
      return el("tr", {"data-stage": s.index, "class": s.state.replace(" ", "-")}, [
        el("td", {"class": "num"}, [s.index]), el("td", {}, [s.state]),
        el("td", {"class": "num"}, [s.trials + " × " + s.epochs]),
        el("td", {}, allocation),
        el("td", {"class": "num"}, [s.epoch_planned]),
        el("td", {"class": "num"}, [s.epoch_measured || "-"]),
        el("td", {"class": "num"}, cell(s.planned)),
        el("td", {"class": "num"}, cell(s.predicted)),
        el("td", {"class": "num"}, cell(s.replanned)),
        el("td", {"class": "num"}, cell(s.repredicted)),
        el("td", {"class": "num measured"}, cell(s.measured))
      ]);
    });
    var body = rows.length ? [table("stages", head, rows)]
                           : [el("p", {"class": "muted"}, ["Not planned yet."])];
    return panel("plan", "Plan against actual, per stage", body, true);
  }

  function spendPanel(v) {
    var s = v.spend;
    var line = [el("span", {id: "spend-total", "class": "big", "data-usd": s.total_usd}, [s.total]),
                " spent"];
    if (s.budget) {
      line.push(" of a ", el("span", {id: "spend-budget", "data-usd": s.budget_usd}, [s.budget]),
                " budget");
    }
    if (s.planned) {
      line.push("; planned ", el("span", {id: "spend-planned", "data-usd": s.planned_usd},
                                  [s.planned]));
    }
    var rows = s.by_kind.map(function (k) {
      return el("tr", {"data-kind": k.kind}, [el("td", {}, [k.kind]),
                                              el("td", {"class": "num"}, [k.text])]);
    });
    rows.push(el("tr", {"class": "total"}, [el("td", {}, ["total"]),
                                            el("td", {"class": "num"}, [s.total])]));
    var chart = el("div", {id: "spend-chart", "class": "chart"});
    return panel("spend", "Spend against budget and plan",
                 [el("p", {}, line), table("bill", ["bill by kind", "US dollars"], rows), chart]);
  }

  function configText(pairs) {
    return pairs.map(function (p) { return p[0] + "=" + p[1]; }).join(", ");
  }

  function trialsPanel(v) {
    var head = ["trial", "config", "status", [v.metric_name, "the last epoch's value; rank " +
                "by the run's metric, " + (v.mode === "max" ? "highest" : "lowest") + " first"],
                "rank", "epochs", "restarts", "cost"];
    var rows = v.trials.map(function (t) {
      return el("tr", {"data-trial": t.trial, "data-status": t.status,
                       "class": t.best ? "best" : null}, [
        el("td", {"class": "num"}, [t.trial + (t.best ? " ★" : "")]),
        el("td", {"class": "config"}, [configText(t.config)]),
        el("td", {"class": "status-cell " + t.status}, [t.status_text]),
        el("td", {"class": "num metric", "data-value": t.metric}, [t.metric_text]),
        el("td", {"class": "num"}, [t.rank === null ? "-" : t.rank]),
        el("td", {"class": "num"}, [t.epochs]),
        el("td", {"class": "num"}, [t.restarts]),
        el("td", {"class": "num", "data-usd": t.cost_usd}, [t.cost_text])
      ]);
    });
    return panel("trials-panel", "Trials (" + v.trials.length + ")",
                 [table("trials", head, rows)], true);
  }

  function failuresPanel(v) {
    var f = v.failures;
    var causes = f.causes.map(function (c) { return c[1] + " " + c[0]; }).join(", ");
    var items = f.items.map(function (x) {
      return el("li", {"data-trial": x.trial}, ["trial " + x.trial + ": " + x.text]);
    });
    return panel("failures-panel", "Restarts and failures", [
      el("p", {}, ["restarts " + f.restarts + (causes ? " (" + causes + ")" : "") +
                   "; segments " + f.segments + "; cold starts " + f.cold_starts]),
      items.length ? el("ul", {id: "failures"}, items)
                   : el("p", {"class": "muted", id: "failures"}, ["No failures."])
    ]);
  }

  function profilePanel(v) {
    if (!v.profile) {
      return panel("profile", "Profile behind the predictions",
                   [el("p", {"class": "muted"}, ["No job profile in the record yet."])]);
    }
    var rows = v.profile.rows.map(function (r) {
      return el("tr", {}, [el("th", {}, [r[0]]), el("td", {}, [r[1]])]);
    });
    return panel("profile", "Profile behind the predictions",
                 [el("table", {"class": "facts"}, [el("tbody", {}, rows)])]);
  }

  function eventsPanel(v) {
    var items = v.events.slice().reverse().map(function (e) {
      return el("li", {}, [el("span", {"class": "muted"}, [e[0] + "  "]), e[1]]);
    });
    return panel("events", "Events (latest first)",
                 [items.length ? el("ul", {"class": "events"}, items)
                               : el("p", {"class": "muted"}, ["None yet."])], true);
  }

  // Charts (uPlot, drawn on canvas) ------------------------------------------------------

  function money(u, values) {
    return values.map(function (v) { return v === 0 ? "0" : "$" + Number(v.toPrecision(3)); });
  }

  function width(node) { return Math.max(320, (node.clientWidth || 560) - 8); }

  function merged(lines) {
    // [[xs, ys], ...] -> uPlot data over the union of the xs (null where a line has no point)
    var xs = [];
    lines.forEach(function (l) { xs = xs.concat(l[0]); });
    xs = xs.filter(function (x, i, all) { return all.indexOf(x) === i; })
           .sort(function (a, b) { return a - b; });
    var data = [xs];
    lines.forEach(function (l) {
      var at = {};
      l[0].forEach(function (x, i) { at[x] = l[1][i]; });
      data.push(xs.map(function (x) { return x in at ? at[x] : null; }));
    });
    return data;
  }

  function chart(node, title, series, data, axes, hooks) {
    if (data[0].length === 0) {
      node.appendChild(el("p", {"class": "muted"}, [title + ": no data yet."]));
      return;
    }
    var opts = {title: title, width: width(node), height: 240, series: [{}].concat(series),
                axes: axes, scales: {x: {time: false}}, hooks: hooks || {},
                legend: {live: false}, cursor: {show: true}};
    charts.push(new uPlot(opts, data, node));
  }

  function spendChart(v) {
    var s = v.spend;
    var lines = [[s.spent.xs, s.spent.ys[0]]];
    var series = [{label: "spent ($)", stroke: COLORS[0], width: 2, spanGaps: true,
                   paths: uPlot.paths.stepped({align: 1}), points: {show: false}}];
    if (s.plan.xs.length) {
      lines.push([s.plan.xs, s.plan.ys[0]]);
      series.push({label: "planned ($)", stroke: COLORS[1], width: 2, dash: [6, 4],
                   spanGaps: true});
    }
    var data = merged(lines);
    var top = Math.max.apply(null, data.slice(1).map(function (ys) {
      return Math.max.apply(null, ys.filter(function (y) { return y !== null; }).concat([0]));
    }));
    var title = "Spend over time (seconds)";
    if (s.budget_usd !== null && top >= 0.1 * s.budget_usd) {
      series.push({label: "budget ($)", stroke: COLORS[3], width: 1, dash: [2, 3]});
      data.push(data[0].map(function () { return s.budget_usd; }));
    } else if (s.budget_usd !== null) {
      title += "; budget " + s.budget + " off the scale";
    }
    chart(document.getElementById("spend-chart"), title, series, data,
          [{label: "seconds"}, {label: "US dollars", size: 80, values: money}]);
  }

  function curvesChart(v) {
    var node = document.getElementById("curves-chart");
    var lines = v.curves.map(function (c) { return [c.epochs, c.values]; });
    var series = v.curves.map(function (c, i) {
      return {label: c.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true,
              points: {show: true, size: 5}};
    });
    var bounds = v.stage_epochs;
    var hooks = {draw: [function (u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.setLineDash([5, 5]);
      ctx.strokeStyle = "#888";
      bounds.forEach(function (b) {
        var x = Math.round(u.valToPos(b + 0.5, "x", true));
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
      });
      ctx.restore();
    }]};
    chart(node, v.metric_name + " by epoch (dashed: stage ends)", series, merged(lines),
          [{label: "epoch", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500]},
           {label: v.metric_name, size: 60}], hooks);
  }

  function usageChart(v) {
    var u = v.usage;
    var series = [
      {label: "functions", stroke: COLORS[0], width: 1, fill: "rgba(31, 119, 180, 0.15)",
       paths: uPlot.paths.stepped({align: 1}), scale: "n", points: {show: false}},
      {label: "GB in use", stroke: COLORS[2], width: 2, dash: [5, 3],
       paths: uPlot.paths.stepped({align: 1}), scale: "gb", points: {show: false}}
    ];
    var axes = [{label: "seconds"}, {label: "functions", scale: "n"},
                {label: "GB", scale: "gb", side: 1, grid: {show: false}}];
    var data = u.xs.length > 1 ? [u.xs, u.ys[0], u.ys[1]] : [[]];
    chart(document.getElementById("usage-chart"), "Functions and memory in use over time",
          series, data, axes);
  }

  // Pages ------------------------------------------------------------------------------------

  function renderRun(v) {
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    var curves = panel("curves", "Ranking metric per trial",
                       [el("div", {id: "curves-chart", "class": "chart"})]);
    var usage = panel("usage", "Functions and memory in use",
                      [el("div", {id: "usage-chart", "class": "chart"})]);
    var parts = [header(v), spendPanel(v), curves, stagesPanel(v), trialsPanel(v), usage,
                 failuresPanel(v), profilePanel(v), eventsPanel(v)];
    app.replaceChildren.apply(app, parts);
    document.title = v.name + " · faasml dashboard";
    if (typeof uPlot === "undefined") {  // its file not served: the tables still show
      showError("the charts' script (static/uPlot.iife.min.js) did not load");
      return;
    }
    spendChart(v);
    curvesChart(v);
    usageChart(v);
  }

  function renderRuns(list) {
    var rows = list.runs.map(function (r) {
      var link = el("a", {}, [r.name]);
      link.href = "?run=" + encodeURIComponent(r.path);
      return el("tr", {"data-path": r.path}, [
        el("td", {}, [link]), el("td", {}, [r.path]), el("td", {}, [r.kind]),
        el("td", {"class": "status-cell " + r.status}, [r.error ? r.error : r.status]),
        el("td", {"class": "num"}, [r.trials]), el("td", {"class": "num"}, [r.bill]),
        el("td", {"class": "num"}, [r.elapsed]), el("td", {}, [r.updated])
      ]);
    });
    var body = rows.length
      ? table("runs", ["run", "directory", "kind", "status", "trials", "bill", "elapsed",
                       "record written"], rows)
      : el("p", {"class": "muted"}, [list.empty]);
    app.replaceChildren(panel("runs-panel", "Runs", [body], true));
    document.title = "faasml dashboard";
  }

  function showError(message) {
    var node = document.getElementById("error");
    if (!node) {
      node = el("p", {id: "error", "class": "error"});
      app.insertBefore(node, app.firstChild);
    }
    node.textContent = message;
  }

  function render(text, draw) {
    if (text === shown) { return; }
    shown = text;
    draw(JSON.parse(text));
  }

  function poll(url, draw) {
    fetch(url, {cache: "no-store"}).then(function (response) {
      return response.text().then(function (text) {
        if (!response.ok) {
          var message = text;
          try { message = JSON.parse(text).error; } catch (e) { /* plain text */ }
          shown = null;
          showError(message);
          return;
        }
        var old = document.getElementById("error");
        if (old) { old.remove(); }
        render(text, draw);
        live.textContent = "live · read " + new Date().toLocaleTimeString();
      });
    }).catch(function () {
      live.textContent = "cannot reach the dashboard server; retrying";
    }).then(function () {
      setTimeout(function () { poll(url, draw); }, POLL_MS);
    });
  }

  if (config.mode === "static") {
    live.textContent = "written " + config.written + " from the run's record";
    render(document.getElementById("faasml-data").textContent, renderRun);
  } else {
    var params = new URLSearchParams(window.location.search);
    var run = params.get("run");
    if (run === null && config.only !== null && !params.has("list")) { run = config.only; }
    if (run === null) {
      poll(config.api + "runs", renderRuns);
    } else {
      poll(config.api + "run?path=" + encodeURIComponent(run), renderRun);
    }
  }
})();
