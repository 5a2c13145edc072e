(function () {
  "use strict";
  // Clicking a transaction (graph node or timeline bar, id a<N>-t<txn> or a<N>-b<txn>)
  // shows its operations in its anomaly's panel, the anomaly's own operations highlighted.
  function show(el) {
    var m = /^a(\d+)-[tb](\d+)$/.exec(el.id || "");
    if (!m) return;
    var section = document.getElementById("a" + m[1]);
    var panel = document.getElementById("a" + m[1] + "-ops");
    var ops = document.getElementById("ops-" + m[2]);
    if (!section || !panel || !ops) return;
    panel.innerHTML = ops.innerHTML;
    panel.setAttribute("data-txn", m[2]);
    panel.hidden = false;
    var involved = (section.getAttribute("data-ops") || "").split(" ");
    panel.querySelectorAll("li[data-op]").forEach(function (li) {
      if (involved.indexOf(li.getAttribute("data-op")) >= 0) li.classList.add("hl");
    });
    section.querySelectorAll("g.txn.selected").forEach(function (g) { g.classList.remove("selected"); });
    section.querySelectorAll("#a" + m[1] + "-t" + m[2] + ", #a" + m[1] + "-b" + m[2]).forEach(function (g) {
      g.classList.add("selected");
    });
  }
  // Clicking a dependency (id a<N>-e<i>) highlights it in the graph, its row of the facts
  // table (a<N>-f<i>) and its arrow in the timeline (a<N>-l<i>).
  function pick(el) {
    var m = /^a(\d+)-e(\d+)$/.exec(el.id || "");
    if (!m) return;
    var section = document.getElementById("a" + m[1]);
    if (!section) return;
    section.querySelectorAll(".picked").forEach(function (x) { x.classList.remove("picked"); });
    ["e", "f", "l"].forEach(function (k) {
      var x = document.getElementById("a" + m[1] + "-" + k + m[2]);
      if (x) x.classList.add("picked");
    });
  }
  document.addEventListener("click", function (ev) {
    if (!ev.target.closest) return;
    var g = ev.target.closest("g.txn");
    if (g) show(g);
    var e = ev.target.closest("g.edge");
    if (e) pick(e);
  });

  // The list of every anomaly, 100 rows a page, filterable by class.
  var data = document.getElementById("all-data");
  if (data) {
    var rows = JSON.parse(data.textContent), drawn = +data.getAttribute("data-drawn");
    var body = document.getElementById("all-rows"), select = document.getElementById("all-kind");
    var label = document.getElementById("all-page"), page = 0, per = 100, kind = "";
    var kinds = [];
    rows.forEach(function (r) { if (kinds.indexOf(r[0]) < 0) kinds.push(r[0]); });
    kinds.sort().forEach(function (k) {
      var o = document.createElement("option"); o.value = k; o.textContent = k; select.appendChild(o);
    });
    var render = function () {
      var picked = [];
      rows.forEach(function (r, i) { if (!kind || r[0] === kind) picked.push(i); });
      var pages = Math.max(1, Math.ceil(picked.length / per));
      page = Math.min(Math.max(page, 0), pages - 1);
      body.textContent = "";
      picked.slice(page * per, (page + 1) * per).forEach(function (i) {
        var tr = document.createElement("tr"), r = rows[i];
        var num = document.createElement("td");
        if (i < drawn) {
          var a = document.createElement("a"); a.href = "#a" + (i + 1); a.textContent = String(i + 1); num.appendChild(a);
        } else num.textContent = String(i + 1);
        tr.appendChild(num);
        [r[0], r[1], r[2]].forEach(function (t) { var td = document.createElement("td"); td.textContent = t; tr.appendChild(td); });
        body.appendChild(tr);
      });
      label.textContent = "page " + (page + 1) + " of " + pages + " (" + picked.length + " anomalies)";
    };
    select.addEventListener("change", function () { kind = select.value; page = 0; render(); });
    document.getElementById("all-prev").addEventListener("click", function () { page--; render(); });
    document.getElementById("all-next").addEventListener("click", function () { page++; render(); });
    document.querySelectorAll("a.filter").forEach(function (a) {
      a.addEventListener("click", function () { kind = a.getAttribute("data-kind"); select.value = kind; page = 0; render(); });
    });
    render();
  }

  // #click=<id> clicks that element once the page is loaded (for links and tests).
  var m = /^#click=(.+)$/.exec(location.hash);
  if (m) {
    var el = document.getElementById(decodeURIComponent(m[1]));
    if (el) el.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  }
})();
document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
