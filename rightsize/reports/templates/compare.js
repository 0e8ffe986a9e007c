/* Draws the compare page's charts with the inlined Chart.js. Data comes only from |tojson. */
(function () {
{% include "chart_setup.js" %}
  /* colours by palette name from the data: a share has the report's colour for it */
  if (RS.changes.labels.length) {
    make("chart-changes", {
      type: "bar",
      data: { labels: RS.changes.labels,
              datasets: [{ label: "B - A, ms per step", data: RS.changes.delta_ms,
                           backgroundColor: RS.changes.colors.map(color) }] },
      options: { indexAxis: "y", plugins: { legend: { display: false } },
                 scales: { x: { title: { display: true,
                                         text: "B - A, ms per step (red: slower)" } } } }
    });
  }
  make("chart-shares", {
    type: "bar",
    data: { labels: ["A", "B"],
            datasets: RS.shares.keys.map(function (k, i) {
              return { label: k, data: [RS.shares.a[i], RS.shares.b[i]],
                       backgroundColor: color(RS.shares.colors[i]) }; }) },
    options: { indexAxis: "y",
               scales: { x: { stacked: true, max: 100,
                              title: { display: true, text: "% of the step" } },
                         y: { stacked: true, ticks: { autoSkip: false } } } }
  });
  document.body.setAttribute("data-charts", String(drawn));
})();
