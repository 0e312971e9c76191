"""Pure figures from judged records, agreement, statistics, and the tables written to metrics/."""
