# The platform on Node 20 (Debian 12), its data (the embedded PostgreSQL, uploads, recordings,
# cached voice samples) under the /data volume. Build: docker build -t assistant-platform .
# Run: docker run -p 3000:3000 -v ap-data:/data assistant-platform
# Stop with `docker stop` (SIGTERM): calls in progress are ended and saved before the database
# stops; give it the grace the README's "Stopping and restarting" names (docker stop -t 40).
FROM node:20-bookworm-slim

# npm 11 honours package.json's allowScripts (the embedded PostgreSQL's install script runs,
# onnxruntime-node's GPU download does not), as on the machines the project is tested on.
RUN npm install -g npm@11 && apt-get update \
  && apt-get install -y --no-install-recommends ca-certificates tini \
  && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY . .

# PostgreSQL refuses to run as root: the platform and its database run as the image's `node` user.
RUN mkdir -p /data && chown -R node:node /data /app
USER node
ENV HOST=0.0.0.0 PORT=3000 DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--import", "tsx", "api/main.ts"]
