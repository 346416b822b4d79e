"""Real servers for the tests, started on free loopback ports in temporary folders and stopped by
PID: Redis, PostgreSQL, the standalone sandbox, nginx (TLS, h2), HAProxy, Squid and a Celery
worker. One concept per file:

- ``availability.py``: skip when a server is not installed, fail under ``BIZMSG_REQUIRE_SERVICES=1``
- ``processes.py``: starting, watching and stopping a process (and what it forked) by PID
- ``server.py``: the lifecycle every server shares (its folder, a free port, start and wait
  until ready, stop by PID, kill, restart, close); each server says how it launches and when
  it is ready
- ``tls.py``: a throwaway CA and server certificate
- ``redis_server.py``, ``postgres_server.py``, ``sandbox_server.py``, ``nginx_server.py``,
  ``haproxy_server.py``, ``squid_server.py``, ``pgbouncer_server.py``, ``celery_worker.py``:
  one server each, on that base, as a context manager usable outside pytest too
- ``hosts.py``: other hosts on this machine (network namespaces), for workers "elsewhere"
- ``reports.py``: figures reported (JSON and the terminal summary) rather than asserted
- ``fixtures.py``: the pytest fixtures over all of them (a plugin loaded by ``tests/conftest.py``)
- ``celery_check_app.py``: the trivial Celery app with which ``test_services.py`` checks the
  worker fixture
- ``test_services.py``: the tests that each server starts, answers and behaves as configured
"""
