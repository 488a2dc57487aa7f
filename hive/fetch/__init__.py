"""The fetch path: DNS and the address guard, robots.txt, the HTTP client with
its headers, cookies and proxy, parsing pages for links, the WARC writer and the
crawl log."""
