"""redis-py over TLS: port, CA file, client certificate and key. Prints ok when every check passes."""
import sys

import redis

port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key,
                     ssl_check_hostname=True, socket_timeout=10)
assert client.ping()
assert client.set("py:tls", b"\x00value\xff")
assert client.get("py:tls") == b"\x00value\xff"
pipe = client.pipeline()
for i in range(100):
    pipe.incr("py:counter")
assert pipe.execute()[-1] == 100
big = b"x" * 200_000
client.set("py:big", big)
assert client.get("py:big") == big
# The server's certificate is for localhost and 127.0.0.1: checked against the address.
print("ok")
