import pytest

from loadwatch import cli


def test_options_after_the_action_are_ours_and_after_dashes_pass_through(monkeypatch):
    captured = {}

    def fake_engine(args):
        captured.update(action=args.action, port=args.port, passthrough=args.passthrough)
        return 0

    monkeypatch.setattr(cli, "engine_command", fake_engine)
    assert cli.main(["engine", "start", "--port", "8123", "--", "--max-num-seqs", "4"]) == 0
    assert captured == {"action": "start", "port": 8123, "passthrough": ["--max-num-seqs", "4"]}


def test_status_without_engine_is_a_message_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOADWATCH_HOME", str(tmp_path))
    assert cli.main(["engine", "status"]) == 1
    assert capsys.readouterr().out == "loadwatch: no engine running\n"


def test_unknown_action_is_refused():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["engine", "explode"])
    assert exit_info.value.code == 2
