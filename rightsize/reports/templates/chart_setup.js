  /* Shared start of every page's chart script (included inside its function): the data from
     the |tojson block, Chart.js defaults, color(), and make(), which counts the charts drawn. */
  "use strict";
  var RS = {{ charts|tojson }};
  if (typeof Chart === "undefined") { return; }
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.size = 11;
  var palette = getComputedStyle(document.documentElement);
  /* A colour of the page's one palette (style.css :root) by its custom property's name, e.g.
     "--c-memory": no chart script holds a colour of its own. */
  function color(name) { return palette.getPropertyValue(name).trim(); }
  var drawn = 0;
  function make(id, config) {
    var el = document.getElementById(id);
    if (!el) { return; }
    new Chart(el, config);
    drawn += 1;
  }
