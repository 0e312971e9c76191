"""`intake-eval report`: metrics/*.csv → report/index.html (self-contained), report/summary.md,
report/headline.csv and the transcript viewer's on-demand shards (report/conversations/*.js).

Entry point: ``intake_eval.report.build.build_report(run_dir, judge=None)``. Optional sections
(safety, diagnosis, trials, …) are listed, in page order, in ``intake_eval.report.section_list``.
"""
