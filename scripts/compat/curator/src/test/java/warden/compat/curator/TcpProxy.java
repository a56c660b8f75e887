package warden.compat.curator;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A loopback TCP forwarder in front of the server under test, so a test can cut a client off:
 * {@link #cut()} closes every forwarded connection and refuses new ones (accepts and closes them at
 * once) until {@link #restore()}. The server sees the client's connection drop and nothing more,
 * exactly as if the network had failed.
 */
final class TcpProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final String upstreamHost;
    private final int upstreamPort;
    private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
    private volatile boolean cut;
    private volatile boolean closed;

    TcpProxy(String connectString) throws IOException {
        String first = connectString.split(",")[0].trim();
        int slash = first.indexOf('/');
        if (slash >= 0) {
            first = first.substring(0, slash);
        }
        int colon = first.lastIndexOf(':');
        upstreamHost = colon > 0 ? first.substring(0, colon) : first;
        upstreamPort = colon > 0 ? Integer.parseInt(first.substring(colon + 1)) : 2181;
        listener = new ServerSocket();
        listener.setReuseAddress(true);
        listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        Thread t = new Thread(this::acceptLoop, "tcp-proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    String connectString() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    void cut() {
        cut = true;
        closeAll();
    }

    void restore() {
        cut = false;
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return;
            }
            if (cut) {
                quietClose(client);
                continue;
            }
            try {
                Socket upstream = new Socket(upstreamHost, upstreamPort);
                client.setTcpNoDelay(true);
                upstream.setTcpNoDelay(true);
                sockets.add(client);
                sockets.add(upstream);
                pump(client, upstream);
                pump(upstream, client);
            } catch (IOException e) {
                quietClose(client);
            }
        }
    }

    private void pump(Socket from, Socket to) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[16384];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) >= 0) {
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException ignored) {
                // connection cut or closed by either side
            } finally {
                quietClose(from);
                quietClose(to);
                sockets.remove(from);
                sockets.remove(to);
            }
        }, "tcp-proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private void closeAll() {
        for (Socket s : sockets) {
            quietClose(s);
        }
        sockets.clear();
    }

    private static void quietClose(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // already closed
        }
    }

    @Override
    public void close() {
        closed = true;
        cut = true;
        try {
            listener.close();
        } catch (IOException ignored) {
            // already closed
        }
        closeAll();
    }
}
