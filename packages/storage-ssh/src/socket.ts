import { Socket } from "node:net";

/**
 * Opens the TCP connection an SSH session runs on: Nagle off (SFTP is request/response, and
 * delayed ACKs would add tens of milliseconds to every round trip) and writes batched per
 * event-loop turn (see `batchWritesPerTurn`). Connection errors reach ssh2 through the socket's
 * `error` event, as they do on a socket ssh2 opens itself.
 */
export function connectSocket(host: string, port: number): Socket {
  const socket = new Socket();
  socket.setNoDelay(true);
  try {
    socket.connect(port, host);
  } catch (error) {
    // Node has made the handle before it checks the port.
    socket.destroy();
    throw error;
  }
  batchWritesPerTurn(socket);
  return socket;
}

/**
 * Holds back what is written to `socket` during one event-loop turn and sends it together when
 * the turn ends. ssh2 writes each piece of each packet on its own (length, ciphertext, tag): for
 * 1 GiB sent in 32 KiB packets that is 100 000 `write(2)`s, against one `writev(2)` per turn
 * here. Nothing waits longer than the turn: the flush runs as soon as the turn's callbacks and
 * promise continuations are done.
 *
 * Call after `connect()`: Node resets an own `write` property there. When the peer closes the
 * connection Node replaces `write` again (writes then fail), which also ends the batching.
 */
export function batchWritesPerTurn(socket: Socket): void {
  const write = socket.write;
  let held = false;
  const flush = () => {
    held = false;
    socket.uncork();
  };
  socket.write = function batchedWrite(this: Socket, ...args: Parameters<Socket["write"]>) {
    if (!held) {
      held = true;
      this.cork();
      setImmediate(flush);
    }
    return write.apply(this, args);
  } as Socket["write"];
}
