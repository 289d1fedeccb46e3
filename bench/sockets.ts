import WebSocket from 'ws';

/**
 * The clients of the chat benchmark's idle-socket measurement, in their own process so the
 * server's memory is measured alone: `{open: {urls, count}}` opens `count` widget sockets (round
 * robin over `urls`) and answers `{opened}`; they stay open until the parent disconnects.
 */

const sockets: WebSocket[] = [];

process.on('message', async (message: { open?: { urls: string[]; count: number } }) => {
  if (!message.open) return;
  const { urls, count } = message.open;
  for (let i = 0; i < count; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, count - i) }, (_, k) => {
        const socket = new WebSocket(urls[(i + k) % urls.length]!);
        sockets.push(socket);
        return new Promise<void>((resolve) => {
          socket.once('open', () => resolve());
          socket.once('error', () => resolve());
        });
      }),
    );
  }
  process.send!({ opened: sockets.filter((s) => s.readyState === WebSocket.OPEN).length });
});
process.on('disconnect', () => {
  for (const socket of sockets) socket.terminate();
  process.exit(0);
});
