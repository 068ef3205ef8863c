"""Feature-store health for people: the report, its JSON and HTML, and the app the Airflow plugin mounts."""
