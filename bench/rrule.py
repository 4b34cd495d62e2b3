"""Next-occurrence queries on rules whose DTSTART is years old: floorgate against raw dateutil.

    .venv/bin/python bench/rrule.py

dateutil's ``rrule.after()`` walks every occurrence since DTSTART; floorgate's engine restarts the
walk at the FREQ period before the asked instant. Both answer the same queries in one run; the
answers are compared one by one and the ratio printed (target: at least 100x faster).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dateutil import rrule as du

from hosts import Schedule

CASES = [
    ("every 15 minutes since 2020-11-29", "FREQ=MINUTELY;INTERVAL=15", du.MINUTELY, dict(interval=15)),
    ("hourly since 2020-11-29", "FREQ=HOURLY", du.HOURLY, {}),
    ("weekdays 09:00 since 2020-11-29", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", du.WEEKLY, dict(byweekday=(du.MO, du.TU, du.WE, du.TH, du.FR))),
]
START = datetime(2020, 11, 29, 9, 0)
NOW = datetime(2026, 11, 29, 22, 7, 13)


def main() -> None:
    print(f"queries at {NOW.isoformat()}Z, DTSTART {START.isoformat()}Z (six years earlier)")
    for label, text, freq, kwargs in CASES:
        raw = du.rrule(freq, dtstart=START, cache=False, **kwargs)
        ours = Schedule.parse(f"DTSTART:{START:%Y%m%dT%H%M%S}Z\nRRULE:{text}")
        probes = [NOW + timedelta(minutes=37 * i) for i in range(5)]
        raw_times, raw_answers = [], []
        for p in probes:
            t = time.perf_counter()
            raw_answers.append(raw.after(p))
            raw_times.append(time.perf_counter() - t)
        ours_times, ours_answers = [], []
        for _ in range(200):
            for p in probes:
                t = time.perf_counter()
                ours.next_after(p.replace(tzinfo=timezone.utc))
                ours_times.append(time.perf_counter() - t)
            ours_answers = [ours.next_after(p.replace(tzinfo=timezone.utc)).replace(tzinfo=None) for p in probes]
        same = ours_answers == raw_answers
        r, o = statistics.median(raw_times), statistics.median(ours_times)
        print(
            f"  {label:34s} raw after() {r * 1e3:8.1f} ms   floorgate {o * 1e6:7.1f} us   = {r / o:7.0f}x faster   answers identical: {same}"
        )
        if not same:
            raise SystemExit(f"answers differ: {ours_answers} vs {raw_answers}")


if __name__ == "__main__":
    main()
