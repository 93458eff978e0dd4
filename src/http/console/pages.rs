//! The console's server-rendered pages: the login form, and the shell the
//! script fills (navigation, the logout form, an empty main region).

use maud::{DOCTYPE, Markup, html};

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="referrer" content="no-referrer";
            link rel="icon" href="data:,";
            title { (title) " · Pincer" }
            link rel="stylesheet" href="/ui/assets/console.css";
        }
    }
}

/// The login page, with what went wrong with the last attempt.
pub fn login(error: Option<&str>) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Log in"))
            body.login {
                main {
                    h1 { "Pincer console" }
                    p { "Paste this server's HTTP token. It is exchanged for a session cookie here and is not kept in the browser." }
                    @if let Some(error) = error {
                        p.error role="alert" id="login-error" { (error) }
                    }
                    form method="post" action="/ui/login" {
                        label for="token" { "Token" }
                        input id="token" name="token" type="password" autocomplete="current-password" required autofocus;
                        button type="submit" { "Log in" }
                    }
                    p.hint { "The token is in " code { "$PINCER_HTTP_TOKEN" } " or the data directory's " code { "http-token" } " file (" code { "pincer doctor" } " says which)." }
                }
            }
        }
    }
    .into_string()
}

/// The page every console address serves to a logged-in browser; the
/// script reads the address and draws the view.
pub fn shell(csrf: &str) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Console"))
            body {
                meta name="pincer-csrf" content=(csrf);
                a.skip href="#app" { "Skip to content" }
                header.top {
                    nav aria-label="Console" {
                        a.brand href="/ui/sessions" { "Pincer" }
                        a href="/ui/sessions" data-nav="sessions" { "Sessions" }
                        a href="/ui/approvals" data-nav="approvals" {
                            "Waiting" span.badge id="waiting-badge" hidden aria-live="polite" {}
                        }
                        a href="/ui/channels" data-nav="channels" { "Channels" }
                        a href="/ui/health" data-nav="health" { "Health" }
                    }
                    form.logout method="post" action="/ui/logout" {
                        input type="hidden" name="csrf" value=(csrf);
                        button type="submit" { "Log out everywhere" }
                    }
                }
                main id="app" tabindex="-1" {
                    noscript { "The console needs JavaScript. The same data is in the REST API (/openapi.json)." }
                }
                div id="announce" class="visually-hidden" aria-live="polite" {}
                script src="/ui/assets/console.js" {}
            }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_page_escapes_its_message() {
        let page = login(Some("<script>alert(1)</script>"));
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
    }

    #[test]
    fn the_shell_has_no_inline_script() {
        let page = shell("abc");
        assert_eq!(page.matches("<script").count(), 1, "{page}");
        assert!(page.contains("<script src=\"/ui/assets/console.js\"></script>"));
        assert!(page.contains("content=\"abc\""));
    }
}
