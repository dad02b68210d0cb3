# nikita on Cloud Run (or any container host): webhook mode on $PORT, migrations at start.
# Build: docker build -t nikita .    Run: docker run -e PORT=8080 --env-file .env -p 8080:8080 nikita
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRAPHITI_TELEMETRY_ENABLED=false \
    PORT=8080

WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY bot ./bot
COPY db ./db
COPY jobs ./jobs
COPY alembic.ini ./
RUN pip install .

# Run as an unprivileged user; ./data holds the SQLite file when DATABASE_URL is not set
# (on Cloud Run use PostgreSQL: the container's disk is not kept between instances).
RUN useradd --create-home --uid 10001 nikita && mkdir -p /app/data && chown nikita /app/data
USER nikita

EXPOSE 8080
# `run` upgrades the schema to head, then serves the webhook on $PORT when WEBHOOK_URL is set
# (long polling otherwise). The working directory keeps db/migrations next to the code.
CMD ["python", "-m", "bot", "run"]
