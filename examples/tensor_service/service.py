"""The tensor service's control channel: a small gRPC service with generic handlers and JSON-bytes
messages (no .proto, no protoc), the shape of the runtime's control plane. Data never travels here: only
rwin descriptors (hex), job ids and slot numbers. Both server.py and client.py import this file.

  rwin.TensorService/Open   {"signal": <client's signal-region descriptor>, "elements": N}
                         -> {"job": id, "slot": k, "input": desc, "output": desc, "doorbell": desc,
                             "doorbell_offset": bytes, "elements": N, "dtype": "float32"}
  rwin.TensorService/Close  {"job": id} -> {"job": id, "rounds": rounds served}
"""
import json

import grpc

SERVICE = "rwin.TensorService"


def encode(obj):
    return json.dumps(obj).encode()


def decode(data):
    return json.loads(data.decode())


def handlers(open_fn, close_fn):
    """A generic handler for the service: open_fn/close_fn take and return dicts."""
    def wrap(fn):
        def call(request, context):
            try:
                return fn(request)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return grpc.unary_unary_rpc_method_handler(call, request_deserializer=decode, response_serializer=encode)
    return grpc.method_handlers_generic_handler(SERVICE, {"Open": wrap(open_fn), "Close": wrap(close_fn)})


class Client:
    def __init__(self, target, timeout=30.0):
        self.channel = grpc.insecure_channel(target)
        self.timeout = timeout
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        self._open = self.channel.unary_unary(f"/{SERVICE}/Open", request_serializer=encode, response_deserializer=decode)
        self._close = self.channel.unary_unary(f"/{SERVICE}/Close", request_serializer=encode, response_deserializer=decode)

    def open(self, **req):
        return self._open(req, timeout=self.timeout)

    def close_job(self, job):
        return self._close({"job": job}, timeout=self.timeout)

    def close(self):
        self.channel.close()


def compute(x):
    """What the service does to an input tensor (the client checks it bit for bit)."""
    return x * 2.0 + 1.0
