FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends libportaudio2 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY calibration ./calibration
COPY server ./server
COPY web ./web
# Editable install: server/app.py serves the page from web/ next to the server package, which a
# plain `pip install .` would leave behind in /app.
RUN pip install -e . \
    && pip install --no-deps 'pipecat-ai==1.14.0'

EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=2)"]
CMD ["duplex-demo", "--host", "0.0.0.0"]
