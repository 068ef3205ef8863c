-- docker-compose: PostgreSQL runs this once, on its first start with an empty data volume
-- (mounted into /docker-entrypoint-initdb.d). One database per owner of a schema and its migrations:
-- Airflow's metadata and MLflow's tracking store each keep an alembic_version table and must never share.
CREATE DATABASE airflow;
CREATE DATABASE mlflow;
CREATE DATABASE solaris_store;
