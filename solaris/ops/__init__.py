"""Operations: the local stack (Airflow, MLflow, ranker as managed processes) and the MLflow server's launch.

Nothing here is needed by a job; it starts, watches and stops the long-running services around them.
"""
