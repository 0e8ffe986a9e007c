/* Draws the fleet page's charts with the inlined Chart.js. Data comes only from |tojson;
   colours are palette names read from the page's style.css. */
(function () {
{% include "chart_setup.js" %}
  function bars(id, data, unit) {
    if (!data.labels.length) { return; }
    make(id, {
      type: "bar",
      data: { labels: data.labels,
              datasets: [{ label: unit, data: data.values,
                           backgroundColor: data.colors.map(color) }] },
      options: { indexAxis: "y", plugins: { legend: { display: false } },
                 scales: { x: { beginAtZero: true, title: { display: true, text: unit } },
                           y: { ticks: { autoSkip: false } } } }
    });
  }
  bars("chart-verdict", RS.verdict, RS.unit);
  bars("chart-bound", RS.bound, RS.unit);
  bars("chart-team", RS.team, RS.unit);
  bars("chart-savings", { labels: RS.savings.labels, values: RS.savings.values,
                          colors: RS.savings.labels.map(function () { return "--good"; }) },
       RS.savings.unit);
  if (RS.weeks.labels.length) {
    make("chart-weeks", {
      type: "bar",
      data: { labels: RS.weeks.labels,
              datasets: [{ label: "the week before", data: RS.weeks.prev,
                           backgroundColor: color("--point-faint") },
                         { label: "this week", data: RS.weeks.this,
                           backgroundColor: RS.weeks.colors.map(color) }] },
      options: { indexAxis: "y", scales: { x: { beginAtZero: true,
                                                title: { display: true, text: "jobs" } } } }
    });
  }
  document.body.setAttribute("data-charts", String(drawn));
})();
