/* Draws the report's charts with the inlined Chart.js. Data comes only from the |tojson block. */
(function () {
{% include "chart_setup.js" %}
  /* category colours come with the data (model.CATEGORY_COLORS): one colour per category */
  function num(v, nd) { return v === null || v === undefined ? "n/a" : v.toFixed(nd); }

  if (RS.breakdown.labels.length) {
    make("chart-breakdown", {
      type: "bar",
      data: { labels: RS.breakdown.labels,
              datasets: [{ label: "ms per step", data: RS.breakdown.ms,
                           backgroundColor: RS.breakdown.colors }] },
      options: { indexAxis: "y", plugins: { legend: { display: false } },
                 scales: { x: { title: { display: true, text: "ms per step" } } } }
    });
  }
  if (RS.shares.labels.length) {
    make("chart-shares", {
      type: "bar",
      data: { labels: ["step"],
              datasets: RS.shares.labels.map(function (name, i) {
                return { label: name, data: [RS.shares.pct[i]],
                         backgroundColor: RS.shares.colors[i] };
              }) },
      options: { indexAxis: "y",
                 scales: { x: { stacked: true, max: 100, title: { display: true, text: "% of step" } },
                           y: { stacked: true, display: false } },
                 plugins: { legend: { position: "bottom" } } }
    });
  }
  var tl = RS.timeline;
  if (tl.t_ms.length) {
    var sets = [];
    function series(values, label, color) {
      if (!values) { return; }
      sets.push({ label: label, borderColor: color, backgroundColor: color, pointRadius: 0,
                  borderWidth: 1.5, spanGaps: false,
                  data: tl.t_ms.map(function (t, i) { return { x: t / 1000, y: values[i] }; }) });
    }
    series(tl.trace_busy_pct, "trace: GPU busy %", "#1b2631");
    series(tl.nvml_gpu_util_pct, "NVML: GPU utilization %", "#1f8a4c");
    make("chart-timeline", {
      type: "line", data: { datasets: sets },
      options: { parsing: false, normalized: true,
                 scales: { x: { type: "linear", title: { display: true, text: "time (s)" } },
                           y: { min: 0, max: 100, title: { display: true, text: "%" } } } }
    });
  }
  if (RS.sizing.length) {
    function group(filter, label, color, radius) {
      return { label: label, backgroundColor: color, borderColor: color, pointRadius: radius,
               data: RS.sizing.filter(filter).map(function (c) {
                 return { x: c.step_ms, y: c.usd_per_1k_steps, name: c.label };
               }) };
    }
    make("chart-sizing", {
      type: "scatter",
      data: { datasets: [
        group(function (c) { return c.recommended; }, "recommended", "#1f8a4c", 7),
        group(function (c) { return c.current && !c.recommended; }, "now", "#1b2631", 7),
        group(function (c) { return c.fits && !c.current && !c.recommended; }, "fits memory", "#5d6d7e", 4),
        group(function (c) { return !c.fits && !c.current && !c.recommended; }, "does not fit", "#aab2bf", 3)
      ] },
      plugins: [{ id: "pointLabels", afterDatasetsDraw: function (chart) {
        /* every candidate named beside its point: no hovering needed to read the chart */
        var ctx = chart.ctx;
        ctx.save();
        ctx.font = "10px sans-serif";
        ctx.fillStyle = "#333";
        chart.data.datasets.forEach(function (set, i) {
          chart.getDatasetMeta(i).data.forEach(function (pt, j) {
            ctx.fillText(set.data[j].name, pt.x + 6, pt.y - 4);
          });
        });
        ctx.restore();
      } }],
      options: {
        scales: { x: { type: "logarithmic", title: { display: true, text: "projected step time (ms)" } },
                  y: { type: "logarithmic", title: { display: true, text: "$ per 1k steps" } } },
        plugins: { tooltip: { callbacks: { label: function (ctx) {
          var p = ctx.raw;
          return p.name + ": " + num(p.x, 2) + " ms, $" + num(p.y, 4) + " per 1k steps";
        } } } }
      }
    });
  }
  window.addEventListener("beforeprint", function () {
    Object.values(Chart.instances).forEach(function (c) { c.resize(); });
  });
  document.body.setAttribute("data-charts", String(drawn));
})();
