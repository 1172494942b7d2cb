"""Locust's --web-login with one account whose password is a secret of the master's environment:
for a web UI opened beyond this machine (--web-host 0.0.0.0)."""

from __future__ import annotations

import hmac
import os

from flask import Blueprint, redirect, request, session, url_for
from flask_login import UserMixin, login_user

from loadwatch.credentials import CredentialError, read_secret

USER = "LOADWATCH_WEB_USER"
PASSWORD = "LOADWATCH_WEB_PASSWORD"
DEFAULT_USER = "loadwatch"


class Account(UserMixin):
    def __init__(self, name: str) -> None:
        self.id = name


def install(web_ui, base_path: str) -> None:
    """CredentialError when --web-login is on and no password is set."""
    password = read_secret(PASSWORD)
    if not password:
        raise CredentialError(f"--web-login needs a password: set ${PASSWORD}, or ${PASSWORD}_FILE to a "
                              f"file holding it (user: ${USER}, default {DEFAULT_USER})")
    user = os.environ.get(USER) or DEFAULT_USER
    # Sessions die with the process: a restarted master asks for the password again.
    web_ui.app.config["SECRET_KEY"] = os.urandom(32)
    web_ui.login_manager.user_loader(lambda name: Account(name) if name == user else None)
    web_ui.auth_args = {"username_password_callback": f"{base_path}/login_submit"}
    blueprint = Blueprint("loadwatch_login", __name__, url_prefix=base_path or None)

    @blueprint.route("/login_submit", methods=["POST"])
    def login_submit():
        given_user = request.form.get("username", "")
        given_password = request.form.get("password", "")
        # Both compared in constant time, whatever the first answer: no timing says which was wrong.
        user_ok = hmac.compare_digest(given_user.encode(), user.encode())
        password_ok = hmac.compare_digest(given_password.encode(), password.encode())
        if user_ok and password_ok:
            login_user(Account(user))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "Wrong user name or password"
        return redirect(url_for("locust.login"))

    web_ui.app.register_blueprint(blueprint)
