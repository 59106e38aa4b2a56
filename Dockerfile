# One image for every Sundry process: the ASGI web server, Celery workers and
# the one-off migrate step. Configured entirely from the environment.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app

# Dependencies first, from pyproject.toml alone, so code edits reuse this layer.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY . .
RUN pip install --no-deps -e . \
    # Hashed, compressed static files for WhiteNoise; the key is for this step only.
    && SUNDRY_ENV=production SUNDRY_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
       SUNDRY_VAR_DIR=/tmp/build-var \
       python manage.py collectstatic --noinput --verbosity 0 \
    && rm -rf /tmp/build-var \
    && useradd --system --uid 10001 --home-dir /app sundry

USER sundry
EXPOSE 8000
CMD ["python", "-m", "sundry.web", "--host", "0.0.0.0", "--port", "8000"]
