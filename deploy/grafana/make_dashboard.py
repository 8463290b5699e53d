#!/usr/bin/env python3
"""Writes deploy/grafana/baton-cluster.json, the cluster dashboard, from the panel list
below: one place for the panels, so that the JSON (which Grafana imports) stays regular.
Every expression uses the recording rules of deploy/prometheus/rules (or `up`), so a
renamed metric changes there only. Run it after editing: python3 deploy/grafana/make_dashboard.py
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}

# (title, unit, [(expr, legend)], width)
ROWS = [
    ("Traffic", [
        ("Requests per second by code", "reqps",
         [("sum by (code) (baton:router_requests:rate5m)", "{{code}}")], 12),
        ("Requests in flight", "short",
         [("baton:router_requests_running:sum", "router"),
          ("sum(baton:worker_requests_running)", "running on workers"),
          ("sum(baton:worker_requests_waiting)", "waiting on workers")], 12),
        ("Tokens per second", "short",
         [("baton:router_prompt_tokens:rate5m", "prompt"),
          ("baton:router_generation_tokens:rate5m", "generated")], 12),
        ("Errors and load shedding", "percentunit",
         [("baton:router_errors:ratio_rate5m", "server errors"),
          ("baton:router_throttled:ratio_rate5m", "throttled (429)")], 12),
    ]),
    ("Latency", [
        ("Time to first token", "s",
         [("baton:router_time_to_first_token_seconds:p50_5m", "p50"),
          ("baton:router_time_to_first_token_seconds:p99_5m", "p99")], 8),
        ("Inter-token latency", "s",
         [("baton:router_inter_token_latency_seconds:p50_5m", "p50"),
          ("baton:router_inter_token_latency_seconds:p99_5m", "p99")], 8),
        ("End-to-end request time", "s",
         [("baton:router_request_duration_seconds:p50_5m", "p50 {{endpoint}}"),
          ("baton:router_request_duration_seconds:p99_5m", "p99 {{endpoint}}")], 8),
        ("Generation: end to end and per output token, p99", "s",
         [("baton:router_e2e_request_latency_seconds:p99_5m", "e2e {{model_name}}"),
          ("baton:router_time_per_output_token_seconds:p99_5m", "per token {{model_name}}")], 12),
        ("Preemptions per second per worker", "short",
         [("baton:worker_preemptions:rate5m", "{{instance}}")], 12),
    ]),
    ("KV cache", [
        ("KV cache usage per worker", "percentunit",
         [("baton:worker_kv_cache_usage:ratio", "{{instance}}")], 12),
        ("Prefix cache hit rate", "percentunit",
         [("baton:router_prefix_cache_hit:ratio_rate5m", "prompt tokens from cache")], 12),
    ]),
    ("Prefill to decode", [
        ("KV transfer bytes per second", "Bps",
         [("baton:kv_transfer_bytes:rate5m", "{{side}}")], 8),
        ("KV transfer time p99", "s",
         [("baton:kv_transfer_seconds:p99_5m", "p99")], 8),
        ("KV transfer failures per second", "short",
         [("baton:kv_transfers_failed:rate5m", "{{side}} {{reason}}")], 8),
    ]),
    ("Routing and health", [
        ("Routing decisions per second", "short",
         [("baton:router_routing_decisions:rate5m", "{{policy}}")], 8),
        ("Healthy workers seen by each router", "short",
         [("baton:router_healthy_workers:count", "{{instance}}")], 8),
        ("Targets up", "short",
         [('sum by (job) (up{job=~"baton.*"})', "{{job}}")], 8),
    ]),
]


def main():
    panels = []
    y = 0
    pid = 1
    for row_title, row in ROWS:
        panels.append({"type": "row", "title": row_title, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid += 1
        y += 1
        x = 0
        for title, unit, targets, width in row:
            if x + width > 24:
                x = 0
                y += 8
            panels.append({
                "type": "timeseries", "title": title, "id": pid, "datasource": DS,
                "gridPos": {"h": 8, "w": width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                            "tooltip": {"mode": "multi"}},
                "targets": [{"datasource": DS, "expr": expr, "legendFormat": legend,
                             "refId": chr(ord("A") + i)}
                            for i, (expr, legend) in enumerate(targets)],
            })
            pid += 1
            x += width
        y += 8
    dashboard = {
        "title": "Baton cluster",
        "uid": "baton-cluster",
        "description": "Requests, latency, tokens, KV cache, prefill-to-decode transfers and "
                       "routing of a Baton cluster (deploy/grafana, from make_dashboard.py).",
        "tags": ["baton", "llm"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{
            "name": "datasource", "label": "Prometheus", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0}]},
        "annotations": {"list": []},
        "panels": panels,
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baton-cluster.json")
    with open(out, "w") as f:
        json.dump(dashboard, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
