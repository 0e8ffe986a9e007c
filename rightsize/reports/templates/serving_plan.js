/* Draws the serving plan's charts with the inlined Chart.js. Data comes only from |tojson;
   colours are palette names read from the page's style.css. */
(function () {
{% include "chart_setup.js" %}
  var SERIES = ["--c-compute", "--c-dataloader", "--c-memory", "--c-pcie"];
  function curves(id, key, slo, unit) {
    if (!RS.curves.length) { return; }
    var sets = RS.curves.map(function (c, i) {
      return { label: c.label, borderColor: color(SERIES[i % SERIES.length]),
               data: c.rate.map(function (x, j) { return { x: x, y: c[key][j] }; }) };
    });
    sets.push({ label: "SLO " + slo + " ms", borderColor: color("--bad"), borderDash: [6, 4],
                pointRadius: 0, data: [{ x: RS.rate_min, y: slo }, { x: RS.rate_max, y: slo }] });
    make(id, { type: "line", data: { datasets: sets },
      options: { scales: {
        x: { type: "linear", title: { display: true, text: "requests per second" } },
        y: { type: "logarithmic", title: { display: true, text: unit } } } } });
  }
  curves("chart-ttft", "ttft", RS.ttft_slo, "TTFT p95 (ms)");
  curves("chart-tpot", "tpot", RS.tpot_slo, "TPOT p95 (ms)");
  make("chart-frontier", { type: "scatter",
    data: { datasets: [
      { label: "TTFT p95 (ms)", backgroundColor: color("--c-compute"), yAxisID: "y",
        data: RS.frontier.map(function (f) { return { x: f.cost, y: f.ttft, label: f.label, cost: f.cost_text }; }) },
      { label: "TPOT p95 (ms)", backgroundColor: color("--c-dataloader"), yAxisID: "y2",
        data: RS.frontier.map(function (f) { return { x: f.cost, y: f.tpot, label: f.label, cost: f.cost_text }; }) }] },
    options: { plugins: { tooltip: { callbacks: { label: function (c) {
        return c.raw.label + ": " + c.raw.cost + "/h, " + c.dataset.label + " " +
          c.raw.y.toFixed(1); } } } },
      scales: { x: { title: { display: true, text: "$ per hour" } },
                y: { title: { display: true, text: "TTFT p95 (ms)" } },
                y2: { position: "right", grid: { drawOnChartArea: false },
                      title: { display: true, text: "TPOT p95 (ms)" } } } } });
  document.body.setAttribute("data-charts", String(drawn));
})();
