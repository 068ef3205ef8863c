# One image for every SOLARIS service in docker-compose.yml: Airflow (api-server, scheduler, dag-processor,
# triggerer, Celery workers), the MLflow server and the ranker.
#
# torch goes first from the index TORCH_INDEX_URL names (the CPU wheels by default; the gpu worker builds
# with a CUDA index), so the project's install below finds it satisfied and never pulls a CUDA build.
# The install is editable on purpose: the package reads dags/ and mlflow/server.toml from the checkout it
# lives in (/opt/solaris), exactly as in development (the store's SQL is package data, under solaris/).
FROM python:3.11-slim

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SOLARIS_HOME=/opt/solaris \
    AIRFLOW_HOME=/opt/airflow

RUN useradd --create-home --uid 50000 --gid 0 solaris
WORKDIR /opt/solaris

RUN pip install pip==26.3 \
 && pip install torch==2.13.0 --index-url "${TORCH_INDEX_URL}"

# Dependencies in their own layer: a stub package lets pip resolve and install them before the sources
# arrive, so a code change does not reinstall Airflow, MLflow and the rest.
COPY pyproject.toml constraints.txt README.md ./
RUN mkdir solaris && touch solaris/__init__.py \
 && pip install -c constraints.txt -e ".[celery]"

COPY solaris ./solaris
COPY dags ./dags
COPY plugins ./plugins
COPY mlflow/server.toml ./mlflow/server.toml

RUN mkdir -p /opt/airflow/logs /srv/solaris/var /srv/mlflow/artifacts \
 && chown -R solaris:0 /opt/airflow /srv/solaris /srv/mlflow
USER solaris
