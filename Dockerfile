# nikita for Cloud Run, or any container host: `gcloud run deploy --source .` builds this file.
# Local: docker build -t nikita . && docker run --env-file .env -p 8080:8080 nikita
# Wheels only, so the image needs no compiler; the embedded graph (falkordblite, built from source)
# is not in it: set GRAPH_BACKEND=falkordb with GRAPH_URL, or GRAPH_BACKEND=none (docs/deploy.md).
FROM python:3.12-slim

# MALLOC_ARENA_MAX=2: glibc keeps two malloc arenas instead of one per thread (less resident memory).
# The process listens on $PORT (Cloud Run and Heroku set it; 8080 otherwise).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MALLOC_ARENA_MAX=2 \
    GRAPHITI_TELEMETRY_ENABLED=false \
    PORT=8080

WORKDIR /app

# The dependency layer: rebuilt only when requirements.txt changes, not on every code change.
COPY requirements.txt ./
RUN pip install --no-cache-dir --only-binary=:all: -r requirements.txt

# The code runs from /app as it is (no package build): `python -m bot` finds bot, agent, db and jobs
# in the working directory, and db/migrations beside them. Compiled once here, as root, so the
# unprivileged process never recompiles at start.
COPY alembic.ini ./
COPY agent ./agent
COPY bot ./bot
COPY db ./db
COPY jobs ./jobs
RUN python -m compileall -q agent bot db jobs \
    && useradd --create-home --uid 10001 nikita \
    && mkdir -p /app/data && chown nikita /app/data
USER nikita

EXPOSE 8080
# Upgrades the schema to head, then serves the webhook on $PORT when WEBHOOK_URL is set (long
# polling otherwise, with /healthz still on $PORT).
CMD ["python", "-m", "bot", "run"]
