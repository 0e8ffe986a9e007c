/* Draws the report's charts with the inlined Chart.js. Data comes only from the |tojson block. */
(function () {
{% include "chart_setup.js" %}
  /* category colours come with the data by palette name (charts.CATEGORY_COLORS); every
     colour is read from style.css's palette through color() */
  function num(v, nd) { return v === null || v === undefined ? "n/a" : v.toFixed(nd); }

  if (RS.breakdown.labels.length) {
    make("chart-breakdown", {
      type: "bar",
      data: { labels: RS.breakdown.labels,
              datasets: [{ label: "ms per step", data: RS.breakdown.ms,
                           backgroundColor: RS.breakdown.colors.map(color) }] },
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
                         backgroundColor: color(RS.shares.colors[i]) };
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
    series(tl.trace_busy_pct, "trace: GPU busy %", color("--ink"));
    series(tl.nvml_gpu_util_pct, "NVML: GPU utilization %", color("--good"));
    make("chart-timeline", {
      type: "line", data: { datasets: sets },
      options: { parsing: false, normalized: true,
                 scales: { x: { type: "linear", title: { display: true, text: "time (s)" } },
                           y: { min: 0, max: 100, title: { display: true, text: "%" } } } }
    });
  }
  var sp = RS.step_split;
  if (sp.series.length) {
    make("chart-steps", {
      type: "bar",
      data: { labels: sp.labels,
              datasets: sp.series.map(function (x) {
                return { label: x.name, data: x.ms, backgroundColor: color(x.color),
                         categoryPercentage: sp.kind === "per_step" ? 0.8 : 1.0,
                         barPercentage: sp.kind === "per_step" ? 0.9 : 1.0 };
              }) },
      options: { scales: {
                   x: { stacked: true, title: { display: true,
                        text: sp.kind === "per_step" ? "step" : "time from the step's start (ms)" } },
                   y: { stacked: true, beginAtZero: true, max: sp.kind === "per_step" ? undefined : 100,
                        title: { display: true, text: sp.kind === "per_step" ? "ms per step" : "% of the slice" } } },
                 plugins: { legend: { position: "bottom" } } }
    });
  }
  var hs = RS.host;
  if (hs.t_s.length) {
    function line(values, label, color, axis, stepped) {
      return { label: label, borderColor: color, backgroundColor: color, yAxisID: axis,
               pointRadius: hs.t_s.length > 60 ? 0 : 2, borderWidth: 1.5, stepped: !!stepped,
               data: hs.t_s.map(function (t, i) { return { x: t, y: values[i] }; }) };
    }
    var window_s = hs.window_s;
    make("chart-host", {
      type: "line",
      data: { datasets: [
        /* no share colour but the data loader's: these lines are not shares of the step */
        line(hs.cpu_util_pct, "machine CPU %", color("--ink"), "pct"),
        line(hs.job_cpu_util_pct, "job CPU % (100 = one core)", color("--good"), "pct"),
        line(hs.rss_mib, "job memory (MiB)", color("--c-rss"), "mib"),
        line(hs.dataloader_workers, "data-loader workers", color(RS.host.dataloader_color),
             "workers", true)
      ] },
      plugins: [{ id: "profiledWindow", beforeDatasetsDraw: function (chart) {
        /* the profiled steps as a shaded band: where the trace's numbers come from */
        if (!window_s) { return; }
        var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
        var a = Math.max(x.getPixelForValue(window_s[0]), area.left);
        var b = Math.min(x.getPixelForValue(window_s[1]), area.right);
        ctx.save();
        ctx.fillStyle = color("--accent-band");
        ctx.fillRect(a, area.top, Math.max(b - a, 2), area.bottom - area.top);
        ctx.fillStyle = color("--accent");
        ctx.font = "10px sans-serif";
        ctx.fillText("profiled steps", Math.min(a + 3, area.right - 70), area.top + 10);
        ctx.restore();
      } }],
      options: { parsing: false, normalized: true,
                 scales: { x: { type: "linear", min: 0, title: { display: true, text: "time since the first sample (s)" } },
                           pct: { position: "left", min: 0, suggestedMax: 100, title: { display: true, text: "CPU %" } },
                           mib: { position: "right", min: 0, grid: { drawOnChartArea: false }, title: { display: true, text: "memory (MiB)" } },
                           workers: { position: "right", min: 0, suggestedMax: 4, ticks: { precision: 0 },
                                      grid: { drawOnChartArea: false }, title: { display: true, text: "workers" } } },
                 plugins: { legend: { position: "bottom" } } }
    });
  }
  function scale(a, title) {
    /* a fixed axis from charts.sizing_axes: from 0, or logarithmic with its labelled ticks when
       one candidate is far from the rest (the others keep a readable spread) */
    if (!a) { return { type: "linear", min: 0, title: { display: true, text: title } }; }
    var s = { type: a.log ? "logarithmic" : "linear", min: a.min, max: a.max,
              title: { display: true, text: a.log ? title + ", log scale" : title } };
    if (a.ticks.length) {
      s.afterBuildTicks = function (axis) {
        axis.ticks = a.ticks.map(function (t) { return { value: t[0] }; });
      };
      s.ticks = { autoSkip: false, callback: function (v, i) { return a.ticks[i][1]; } };
    }
    return s;
  }
  if (RS.sizing.length) {
    var axes = RS.sizing_axes;
    function group(filter, label, color, radius, style) {
      return { label: label, backgroundColor: color, borderColor: color, pointRadius: radius,
               pointStyle: style || "circle", borderWidth: 2,
               data: RS.sizing.filter(filter).map(function (c) {
                 return { x: c.step_ms, y: c.usd_per_1k_steps, name: c.label,
                          lo: c.step_low_ms, hi: c.step_high_ms };
               }) };
    }
    make("chart-sizing", {
      type: "scatter",
      data: { datasets: [
        group(function (c) { return c.recommended; }, "recommended", color("--good"), 8, "rect"),
        group(function (c) { return c.current && !c.recommended; }, "now", color("--ink"), 8, "circle"),
        group(function (c) { return c.fits && !c.current && !c.recommended; }, "fits memory", color("--point"), 4),
        group(function (c) { return !c.fits && !c.current && !c.recommended; }, "does not fit", color("--point-faint"), 3)
      ] },
      plugins: [{ id: "ranges", beforeDatasetsDraw: function (chart) {
        /* the projected range of each candidate as a bar through its point */
        var ctx = chart.ctx, x = chart.scales.x;
        ctx.save();
        chart.data.datasets.forEach(function (set, i) {
          ctx.strokeStyle = set.borderColor;
          ctx.lineWidth = 2;
          chart.getDatasetMeta(i).data.forEach(function (pt, j) {
            var p = set.data[j];
            if (p.lo === null || p.hi === null || p.hi <= p.lo) { return; }
            var a = x.getPixelForValue(p.lo), b = x.getPixelForValue(p.hi);
            ctx.beginPath(); ctx.moveTo(a, pt.y); ctx.lineTo(b, pt.y);
            ctx.moveTo(a, pt.y - 4); ctx.lineTo(a, pt.y + 4);
            ctx.moveTo(b, pt.y - 4); ctx.lineTo(b, pt.y + 4);
            ctx.stroke();
          });
        });
        ctx.restore();
      }, afterDatasetsDraw: function (chart) {
        /* every candidate named beside its point where the name crosses no other name, no
           point and no range bar, inside the plot; names that find no such place give way
           (the table lists every candidate) */
        var ctx = chart.ctx, x = chart.scales.x, area = chart.chartArea, now = RS.sizing_now;
        var taken = [], named = [], boxes = [], bars = [];
        function clear(b) {
          if (b[0] < area.left || b[2] > area.right || b[1] < area.top || b[3] > area.bottom) {
            return false;
          }
          return !taken.some(function (t) {
            return b[0] < t[2] && t[0] < b[2] && b[1] < t[3] && t[1] < b[3];
          });
        }
        ctx.save();
        chart.data.datasets.forEach(function (set, i) {  /* points and their range bars */
          chart.getDatasetMeta(i).data.forEach(function (pt, j) {
            var p = set.data[j];
            taken.push([pt.x - 5, pt.y - 5, pt.x + 5, pt.y + 5]);
            if (p.lo !== null && p.hi !== null && p.hi > p.lo) {
              var bar = [x.getPixelForValue(p.lo), pt.y - 4, x.getPixelForValue(p.hi), pt.y + 4];
              taken.push(bar);
              bars.push(bar);
            }
          });
        });
        if (now) {  /* the GPU now has no price: its step time as a dashed line */
          var nx = x.getPixelForValue(now.step_ms);
          ctx.strokeStyle = color("--ink");
          ctx.lineWidth = 1;
          ctx.setLineDash([5, 4]);
          ctx.beginPath(); ctx.moveTo(nx, area.top); ctx.lineTo(nx, area.bottom); ctx.stroke();
          ctx.setLineDash([]);
          bars.push([nx - 0.5, area.top, nx + 0.5, area.bottom]);
          ctx.font = "bold 11px sans-serif";
          ctx.fillStyle = color("--ink");
          var nt = "now: " + now.label + " (" + now.note + ")", nw = ctx.measureText(nt).width;
          for (var r = 0; r < 12; r++) {
            var ny = area.top + 12 + r * 14;
            var tries = [nx + 4, nx - 4 - nw];
            for (var q = 0; q < tries.length; q++) {
              var nb = [tries[q], ny - 10, tries[q] + nw, ny + 2];
              if (clear(nb)) {
                ctx.fillText(nt, nb[0], ny);
                taken.push(nb); boxes.push(nb); named.push(now.label);
                r = 12; break;
              }
            }
          }
        }
        ctx.strokeStyle = color("--halo");
        ctx.lineWidth = 3;
        ctx.lineJoin = "round";
        chart.data.datasets.forEach(function (set, i) {
          var strong = i < 2;
          ctx.font = (strong ? "bold " : "") + "11px sans-serif";
          ctx.fillStyle = strong ? set.borderColor : color("--ink-soft");
          chart.getDatasetMeta(i).data.forEach(function (pt, j) {
            var p = set.data[j], text = p.name, w = ctx.measureText(text).width;
            var hi = p.hi !== null ? x.getPixelForValue(p.hi) - pt.x : 0;
            var lo = p.lo !== null ? x.getPixelForValue(p.lo) - pt.x : 0;
            var spots = [[hi + 6, 4], [lo - 6 - w, 4], [8, -6], [8, 16], [-8 - w, -6],
                         [-8 - w, 16], [8, -18], [8, 28], [-8 - w, -18], [-8 - w, 28]];
            for (var k = 0; strong && k < 8; k++) {  /* the pick and the GPU now: further out */
              spots.push([8, -30 - 12 * k], [8, 40 + 12 * k]);
            }
            for (var s = 0; s < spots.length; s++) {
              var bx = pt.x + spots[s][0], by = pt.y + spots[s][1];
              var box = [bx, by - 10, bx + w, by + 2];
              if (clear(box)) {
                taken.push(box); boxes.push(box); named.push(text);
                ctx.strokeText(text, bx, by);  /* a white halo: readable over the grid */
                ctx.fillText(text, bx, by);
                return;
              }
            }
          });
        });
        ctx.restore();
        /* for the browser tests: what was named, and where every name and bar is drawn */
        chart.canvas.setAttribute("data-labels", named.join("|"));
        chart.canvas.setAttribute("data-label-boxes", JSON.stringify(boxes));
        chart.canvas.setAttribute("data-bars", JSON.stringify(bars));
      } }],
      options: {
        scales: { x: scale(axes && axes.x, "projected step time (ms), with its range"),
                  y: scale(axes && axes.y, "$ per 1k steps") },
        plugins: { legend: { position: "bottom", labels: { usePointStyle: true,
                     filter: function (item, data) { return data.datasets[item.datasetIndex].data.length > 0; } } },
                   tooltip: { callbacks: { label: function (ctx) {
          var p = ctx.raw;
          var range = p.lo !== null && p.hi !== null ? " (" + num(p.lo, 2) + "-" + num(p.hi, 2) + ")" : "";
          return p.name + ": " + num(p.x, 2) + " ms" + range + ", $" + num(p.y, 4) + " per 1k steps";
        } } } }
      }
    });
  }
  window.addEventListener("beforeprint", function () {
    Object.values(Chart.instances).forEach(function (c) { c.resize(); });
  });
  document.body.setAttribute("data-charts", String(drawn));
})();
