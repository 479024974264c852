/* customgrad's R site, read from disk with no network.
 *
 * pkgdown 2.0.7's pkgdown.js calls headroom.js, clipboard.js, mark.js, fuse.js and
 * autocomplete.js, which its template loads from CDNs and which are not on the machine that builds
 * this site. These are stand-ins written for this site, each providing only what pkgdown.js calls:
 *   $.fn.headroom       hides the navbar while scrolling down (the classes pkgdown.css styles)
 *   ClipboardJS         the copy buttons, through navigator.clipboard
 *   Mark                highlights the searched words on the page a search result opens
 *   Fuse                finds the entries of the search index holding every word of the query
 *   $.fn.autocomplete   the drop-down of search results (keyboard and mouse)
 * A page opened from disk cannot fetch() search.json, so the index comes from
 * offline/search-index.js (written by scripts/build_r_site.R), and bootstrap-toc 0.4.1 (pkgdown's
 * own copy, for Bootstrap 3) marks its entries up as bootstrap-toc 1.0.1 does for Bootstrap 5.
 * Loaded after jQuery and bootstrap-toc, before pkgdown.js.
 */
(function ($) {
  "use strict";

  // the site's root, from this file's own address (<root>/offline/offline.js)
  var here = document.currentScript ? document.currentScript.src : "";
  var root = here.replace(/offline\/offline\.js([?#].*)?$/, "");

  /* "On this page" ------------------------------------------------------------------------ */
  if (window.Toc) {
    // Bootstrap 5.2's scrollspy looks each entry's target up with querySelector("#" + id), which
    // throws on an id that is not a CSS identifier (a date heading: "#2026-11-26") and stops the
    // page's scripts. Such a heading gets an id that is one; its own id stays on an empty element
    // in front of it, so that addresses with the old fragment still land there.
    var generateAnchor = window.Toc.helpers.generateAnchor;
    window.Toc.helpers.generateAnchor = function (el) {
      if (el.id && !/^-?[A-Za-z_]/.test(el.id)) {
        var old = el.id;
        var id = "section-" + old;
        for (var n = 1; document.getElementById(id); n++) id = "section-" + old + "-" + n;
        el.id = id;
        $("<span></span>").attr("id", old).insertBefore(el);
      }
      return generateAnchor.call(this, el);
    };
    var generateNavEl = window.Toc.helpers.generateNavEl;
    window.Toc.helpers.createNavList = function () {
      return $('<ul class="nav nav-pills flex-column"></ul>');
    };
    window.Toc.helpers.generateNavEl = function (anchor, text) {
      var $li = generateNavEl.call(this, anchor, text);
      $li.addClass("nav-item").children("a").addClass("nav-link");
      return $li;
    };
  }

  /* headroom ------------------------------------------------------------------------------ */
  $.fn.headroom = function () {
    var $nav = this.addClass("headroom headroom--pinned");
    var last = window.scrollY;
    $(window).on("scroll", function () {
      var now = window.scrollY;
      var down = now > last && now > $nav.outerHeight();
      $nav.toggleClass("headroom--unpinned", down).toggleClass("headroom--pinned", !down);
      last = now;
    });
    return this;
  };

  /* copy buttons -------------------------------------------------------------------------- */
  function ClipboardJS(selector, options) {
    var handlers = { success: [], error: [] };
    this.on = function (name, handler) {
      handlers[name].push(handler);
      return this;
    };
    $(document).on("click", selector, function (event) {
      var trigger = event.currentTarget;
      var text = options.text(trigger);
      var report = function (name) {
        handlers[name].forEach(function (handler) {
          handler({ action: "copy", text: text, trigger: trigger, clearSelection: function () {} });
        });
      };
      navigator.clipboard.writeText(text).then(
        function () { report("success"); },
        function () { report("error"); }
      );
    });
  }
  ClipboardJS.isSupported = function () {
    return Boolean(navigator.clipboard && navigator.clipboard.writeText);
  };
  window.ClipboardJS = ClipboardJS;

  /* highlighting the searched words ------------------------------------------------------- */
  function Mark(selector) {
    this.root = document.querySelector(selector);
  }
  Mark.prototype.mark = function (query) {
    if (!this.root || !query) return;
    var words = query.toLowerCase().split(/\s+/).filter(Boolean);
    var walker = document.createTreeWalker(this.root, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    nodes.forEach(function (node) {
      if ($(node.parentNode).closest("script, style, mark").length) return;
      words.forEach(function (word) {
        var at = node.nodeValue.toLowerCase().indexOf(word);
        if (at < 0) return;
        var hit = node.splitText(at);
        node = hit.splitText(word.length); // the rest may hold another word
        var mark = document.createElement("mark");
        hit.parentNode.replaceChild(mark, hit);
        mark.appendChild(hit);
      });
    });
  };
  window.Mark = Mark;

  /* search -------------------------------------------------------------------------------- */
  // An entry matches when its keys hold every word of the query; those whose heading ("what")
  // or page title holds them all come first, then in the index's order (a user's pages first:
  // scripts/build_r_site.R).
  function Fuse(entries, options) {
    this.entries = entries;
    this.keys = options.keys;
  }
  Fuse.prototype.search = function (query, options) {
    var words = query.toLowerCase().split(/\s+/).filter(Boolean);
    var keys = this.keys;
    var found = [];
    this.entries.forEach(function (entry) {
      var text = keys.map(function (key) { return String(entry[key] || ""); }).join(" ")
        .toLowerCase();
      var what = (String(entry.what || "") + " " + String(entry.title || "")).toLowerCase();
      if (!words.every(function (word) { return text.indexOf(word) >= 0; })) return;
      var inWhat = words.every(function (word) { return what.indexOf(word) >= 0; });
      found.push({ item: entry, score: inWhat ? 0 : 0.5, refIndex: found.length });
    });
    found.sort(function (a, b) { return a.score - b.score || a.refIndex - b.refIndex; });
    return options && options.limit ? found.slice(0, options.limit) : found;
  };
  window.Fuse = Fuse;

  $.fn.autocomplete = function (options, datasets) {
    var $input = this;
    var dataset = datasets[0];
    var $menu = $('<div class="aa-dropdown-menu" role="listbox"></div>').hide();
    $input.wrap('<span class="algolia-autocomplete" style="position: relative;"></span>');
    $input.after($menu);
    var shown = [];
    var cursor = -1;

    function choose(i) {
      if (shown[i]) $input.trigger("autocomplete:selected", [shown[i]]);
    }
    function moveTo(i) {
      cursor = i;
      $menu.children().each(function (j, el) { $(el).toggleClass("aa-cursor", j === i); });
    }
    function show(items) {
      shown = items;
      $menu.empty();
      items.forEach(function (item, i) {
        $('<div class="aa-suggestion" role="option"></div>')
          .html(dataset.templates.suggestion(item))
          .on("mousedown", function (event) { event.preventDefault(); choose(i); })
          .on("mouseenter", function () { moveTo(i); })
          .appendTo($menu);
      });
      moveTo(items.length && options.autoselect ? 0 : -1);
      $menu.toggle(items.length > 0);
    }

    $input.on("input", function () {
      var query = $input.val();
      if (query.length < (options.minLength || 1)) return show([]);
      dataset.source(query, show);
    });
    $input.on("keydown", function (event) {
      if (event.key === "ArrowDown" && shown.length) {
        moveTo((cursor + 1) % shown.length);
      } else if (event.key === "ArrowUp" && shown.length) {
        moveTo((cursor - 1 + shown.length) % shown.length);
      } else if (event.key === "Enter" && cursor >= 0) {
        choose(cursor);
      } else if (event.key === "Escape") {
        show([]);
        return;
      } else {
        return;
      }
      event.preventDefault();
    });
    $input.on("blur", function () { $menu.hide(); });
    return this;
  };

  // pkgdown.js fetch()es the index named by the search box; a page read from disk may not, so
  // the index offline/search-index.js defined is handed over instead, its paths made absolute
  // from the site's root (pkgdown writes them from the root of a served site: "/reference/...").
  var index = window.customgradSearchIndex;
  if (index && window.fetch) {
    index = index.map(function (entry) {
      return $.extend({}, entry, { path: root + String(entry.path).replace(/^\//, "") });
    });
    var fetchOther = window.fetch;
    window.fetch = function (resource) {
      if (/(^|\/)search\.json$/.test(String(resource))) {
        return Promise.resolve({ json: function () { return Promise.resolve(index); } });
      }
      return fetchOther.apply(this, arguments);
    };
  }
})(window.jQuery);
