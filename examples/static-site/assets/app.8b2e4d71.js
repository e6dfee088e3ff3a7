// Marks the current page's link, the only script of the example site.
for (const link of document.querySelectorAll("a[href]")) {
  if (new URL(link.href).pathname === location.pathname) link.setAttribute("aria-current", "page");
}
