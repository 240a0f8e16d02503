"""A small controller runtime: raw-JSON client, informers, work queue, rate limits, controller
workers, leader election, events and probes.

It knows nothing about MPI or any other kind it may be used for; the operator's controller
builds on it. One module per concern:

* :mod:`.clock` — time as a dependency (real, or fake for tests)
* :mod:`.ratelimit` — token bucket, per-item exponential backoff, their max
* :mod:`.workqueue` — the rate-limited, deduplicating work queue
* :mod:`.objects` — reading metadata of raw objects; keys
* :mod:`.store` — the indexed cache
* :mod:`.kubeconfig`, :mod:`.credentials` — where the API server is and who we are to it
* :mod:`.client` — API calls as plain JSON over urllib3 (:mod:`.curl`: libcurl, where installed)
* :mod:`.reflector`, :mod:`.informer` — list + watch into a store, with event handlers
* :mod:`.controller` — worker threads and reconcile result handling
* :mod:`.leader` — Lease leader election
* :mod:`.events` — the Event recorder
* :mod:`.health` — ``/healthz``, ``/readyz`` and the metrics listener
"""
