// rightsize serve: the upload page (drag and drop, XHR with upload progress) and the run page
// (polls the run's status, then opens its report). Served from this origin; no inline script.
"use strict";

function setupUpload() {
  const form = document.getElementById("upload");
  if (!form) return;
  const drop = document.getElementById("drop");
  const input = document.getElementById("file");
  const chosen = document.getElementById("chosen");
  const bar = document.getElementById("progress");
  const message = document.getElementById("message");
  let files = [];

  function choose(list) {
    files = Array.from(list);
    chosen.textContent = files.map(f => f.name).join(", ");
  }
  input.addEventListener("change", () => choose(input.files));
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, e => { e.preventDefault(); drop.classList.add("over"); });
  }
  for (const name of ["dragleave", "drop"]) {
    drop.addEventListener(name, e => { e.preventDefault(); drop.classList.remove("over"); });
  }
  drop.addEventListener("drop", e => choose(e.dataTransfer.files));

  form.addEventListener("submit", e => {
    e.preventDefault();
    if (!files.length) { message.textContent = "Choose or drop at least one file."; return; }
    const body = new FormData();
    for (const f of files) body.append("file", f, f.name);
    const labels = new URLSearchParams();
    for (const name of ["team", "project"]) {
      const field = document.getElementById(name);
      if (field && field.value.trim()) labels.set(name, field.value.trim());
    }
    const xhr = new XMLHttpRequest();
    xhr.open("POST", labels.toString() ? `/api/runs?${labels}` : "/api/runs");
    bar.hidden = false;
    bar.value = 0;
    xhr.upload.addEventListener("progress", ev => {
      if (ev.lengthComputable) {
        bar.value = Math.round(ev.loaded / ev.total * 100);
        message.textContent = `Uploading: ${bar.value}%`;
      }
    });
    xhr.addEventListener("load", () => {
      let reply = {};
      try { reply = JSON.parse(xhr.responseText); } catch (err) { reply = {}; }
      if (xhr.status === 200 || xhr.status === 201) {
        bar.value = 100;
        message.textContent = "Uploaded; analyzing.";
        window.location.assign(`/runs/${encodeURIComponent(reply.id)}`);
      } else {
        message.textContent = `Refused (${xhr.status}): ${reply.error || xhr.statusText}`;
      }
    });
    xhr.addEventListener("error", () => { message.textContent = "Upload failed (connection)."; });
    xhr.send(body);
  });
}

function setupRun() {
  const section = document.getElementById("run");
  if (!section) return;
  const id = section.dataset.id;
  const status = document.getElementById("status");
  const error = document.getElementById("error");
  async function poll() {
    let reply;
    try {
      const response = await fetch(`/api/runs/${encodeURIComponent(id)}?analysis=0`);
      reply = await response.json();
    } catch (err) {
      setTimeout(poll, 2000);
      return;
    }
    status.textContent = reply.status;
    if (reply.status === "done") {
      window.location.assign(`/r/${encodeURIComponent(id)}`);
    } else if (reply.status === "failed") {
      error.textContent = reply.error || "";
    } else {
      setTimeout(poll, 700);
    }
  }
  if (section.dataset.status !== "failed") poll();
}

document.addEventListener("DOMContentLoaded", () => { setupUpload(); setupRun(); });
