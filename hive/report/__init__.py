"""The crawl report (``hive report``): one self-contained HTML file about a crawl.

Read in three steps, one module each: :mod:`hive.report.lines` streams the crawl
logs and says what it skipped, :mod:`hive.report.tally` folds the lines into
bounded counters and time buckets (with :mod:`hive.report.pending` reading the
pending URLs per host from the stores), and :mod:`hive.report.render` draws the
page.
"""
