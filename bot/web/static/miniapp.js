// What the Mini Apps share: the launch parameters Telegram puts in the URL fragment, the API call
// signed with their initData, and the page helpers. All text is inserted with textContent.
"use strict";

window.miniapp = (function () {
  const $ = (id) => document.getElementById(id);

  // A reload inside Telegram may lose the fragment, so this tab keeps its copy under `key`
  // (sessionStorage: this tab only, gone when it closes).
  function launchParams(key) {
    const fragment = new URLSearchParams(window.location.hash.slice(1));
    try {
      if (fragment.has("tgWebAppData")) {
        window.sessionStorage.setItem(key + ":launch", fragment.toString());
      } else if (window.sessionStorage.getItem(key + ":launch")) {
        return new URLSearchParams(window.sessionStorage.getItem(key + ":launch"));
      }
    } catch (error) {
      // Storage refused (private mode): the fragment alone will do.
    }
    return fragment;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function status(text) {
    $("status").textContent = text || "";
  }

  // The page's API call: `initData()` signs it, `expired` is what a refused sign-in (401) says.
  function signedApi(initData, expired) {
    return async function api(path, options) {
      const headers = { Authorization: "tma " + initData() };
      if (options && options.json !== undefined) headers["Content-Type"] = "application/json";
      const response = await fetch(path, {
        method: (options && options.method) || "GET",
        headers: headers,
        body: options && options.json !== undefined ? JSON.stringify(options.json) : undefined,
        cache: "no-store",
      });
      const body = await response.json().catch(() => ({}));
      if (response.status === 401) throw new Error(expired);
      if (!response.ok) throw new Error(body.error || "Something went wrong (" + response.status + ").");
      return body;
    };
  }

  return { $: $, launchParams: launchParams, el: el, status: status, signedApi: signedApi };
})();
