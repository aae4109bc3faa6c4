"""A TCP proxy on loopback that can cut the connections through it, for fault
tests: an agent dials the proxy, the proxy dials the tracker.

- reset(): every open connection is reset (RST on both sides), as when a
  router or firewall drops the flow and says so;
- blackhole(): every open connection goes silent for good: what either side
  sends is swallowed and nothing arrives, as when a link dies without a word
  (only keepalives or heartbeats can tell);
- refuse(True/False): new connections are reset at once / passed again.
"""
import socket
import struct
import threading


class Proxy:
    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.pairs = []  # [client socket, upstream socket, silent flag]
        self.refusing = False
        self.closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _reset(sock):
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                self._reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                self._reset(client)
                continue
            pair = [client, upstream, False]
            with self.lock:
                self.pairs.append(pair)
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream, pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pair), daemon=True).start()

    def _pump(self, src, dst, pair):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            if pair[2]:
                continue  # silent: swallowed
            try:
                dst.sendall(data)
            except OSError:
                break
        if not pair[2]:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def reset(self):
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for client, upstream, _ in pairs:
            self._reset(client)
            self._reset(upstream)

    def blackhole(self):
        with self.lock:
            for pair in self.pairs:
                pair[2] = True

    def refuse(self, on):
        self.refusing = on

    def close(self):
        self.closed = True
        self.listener.close()
        self.reset()
