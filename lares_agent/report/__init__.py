"""report layer: read a run directory and write ``report/index.html`` with matplotlib figures.

Import from the submodules (``lares_agent.report.html.write_report``; the run is read by
``lares_agent.runs.reader.read_run``); this file
stays empty so importing the package costs nothing.
"""
