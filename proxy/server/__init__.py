"""The HTTP server: processes and sockets (``workers``, ``listener``, ``drain``), the aiohttp app and
its one middleware (``front``: observation, the guard, CORS, auth, overload), thin handlers per route,
typed app state with the swappable runtime, client connection bounds, and the ``/v1/models`` catalog.

The top of the house: may import every other package; nothing imports it (``cli`` excepted).
"""
