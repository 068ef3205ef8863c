import sqlalchemy as sa


def test_session_database_is_real_and_private(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        name = conn.execute(sa.text("select current_database()")).scalar_one()
        version = conn.execute(sa.text("show server_version_num")).scalar_one()
    engine.dispose()
    assert name.startswith("solaris_test_")
    assert int(version) >= 120000
