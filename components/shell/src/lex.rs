//! A small shell lexer for screening, not for running: it undoes the quoting tricks that hide a
//! command (`r'm'`, `"r"m`, `r\m`, `$'\x72m'`, `${IFS}`) and pulls out the nested scripts the
//! shell would also run (`$(...)`, backticks, `<(...)`), so every layer sees the command as the
//! shell will.

/// One simple command: its words (quotes removed) and the redirections it makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Simple {
    /// The words, in order, with quoting removed.
    pub words: Vec<Word>,
    /// Redirection targets, with their operator (`>`, `>>`, `<`, `<<<`, ...).
    pub redirects: Vec<(String, String)>,
}

/// One word of a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The text with quotes and escapes removed; substitutions become `$(…)`.
    pub text: String,
    /// Whether an unquoted part of it expands at run time (`$x`, `$(…)`, backticks, globs,
    /// braces): its value cannot be known before it runs.
    pub dynamic: bool,
}

/// A lexed script: pipelines of simple commands, and the nested scripts found inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Pipelines, each a list of simple commands joined by `|`.
    pub pipelines: Vec<Vec<Simple>>,
    /// Bodies of `$(…)`, backticks and `<(…)`/`>(…)`, to screen as scripts of their own.
    pub nested: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// Ends a pipeline (`;`, `&&`, `||`, `&`, newline, parentheses, braces).
    Pipeline,
    /// Ends a command within a pipeline (`|`, `|&`).
    Pipe,
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    script: Script,
    pipeline: Vec<Simple>,
    simple: Simple,
    word: Word,
    in_word: bool,
    pending_redirect: Option<String>,
}

/// Lex `text` for screening.
pub fn lex(text: &str) -> Script {
    let mut lx = Lexer {
        chars: text.chars().peekable(),
        script: Script::default(),
        pipeline: Vec::new(),
        simple: Simple::default(),
        word: Word::default(),
        in_word: false,
        pending_redirect: None,
    };
    lx.run();
    lx.script
}

impl Lexer<'_> {
    fn run(&mut self) {
        while let Some(c) = self.chars.next() {
            match c {
                '\'' => {
                    self.in_word = true;
                    for c in self.chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                        self.word.text.push(c);
                    }
                }
                '"' => {
                    self.in_word = true;
                    self.double_quoted();
                }
                '\\' => {
                    self.in_word = true;
                    match self.chars.next() {
                        Some('\n') | None => {}
                        Some(c) => self.word.text.push(c),
                    }
                }
                '$' => {
                    self.in_word = true;
                    self.dollar(false);
                }
                '`' => {
                    self.in_word = true;
                    let body = self.until_backtick();
                    self.substitution(body);
                }
                '#' if !self.in_word => {
                    for c in self.chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                    self.separator(Sep::Pipeline);
                }
                ' ' | '\t' => self.end_word(),
                '\n' | ';' | '(' | ')' => self.separator(Sep::Pipeline),
                '{' | '}' if !self.in_word && self.next_is_space_or_end() => {
                    self.separator(Sep::Pipeline)
                }
                '&' => {
                    if self.chars.peek() == Some(&'>') {
                        self.redirect('>');
                    } else {
                        self.chars.next_if_eq(&'&');
                        self.separator(Sep::Pipeline);
                    }
                }
                '|' => {
                    if self.chars.next_if_eq(&'|').is_some() {
                        self.separator(Sep::Pipeline);
                    } else {
                        self.chars.next_if_eq(&'&');
                        self.separator(Sep::Pipe);
                    }
                }
                '<' | '>' if self.chars.peek() == Some(&'(') => {
                    self.chars.next();
                    let body = self.until_paren();
                    self.in_word = true;
                    self.substitution(body);
                }
                '<' | '>' => self.redirect(c),
                '*' | '?' | '[' | '{' | '~' => {
                    self.in_word = true;
                    self.word.dynamic = true;
                    self.word.text.push(c);
                }
                c => {
                    self.in_word = true;
                    self.word.text.push(c);
                }
            }
        }
        self.separator(Sep::Pipeline);
    }

    fn next_is_space_or_end(&mut self) -> bool {
        self.chars
            .peek()
            .is_none_or(|c| c.is_whitespace() || *c == ';')
    }

    fn double_quoted(&mut self) {
        while let Some(c) = self.chars.next() {
            match c {
                '"' => return,
                '\\' => match self.chars.next() {
                    Some(n @ ('"' | '\\' | '$' | '`')) => self.word.text.push(n),
                    Some('\n') | None => {}
                    Some(n) => {
                        self.word.text.push('\\');
                        self.word.text.push(n);
                    }
                },
                '$' => self.dollar(true),
                '`' => {
                    let body = self.until_backtick();
                    self.substitution(body);
                }
                c => self.word.text.push(c),
            }
        }
    }

    /// After `$`: `$(…)`, `$((…))`, `${…}`, `$'…'`, `$NAME` or a lone `$`.
    fn dollar(&mut self, quoted: bool) {
        match self.chars.peek().copied() {
            Some('(') => {
                self.chars.next();
                let body = self.until_paren();
                // `$((…))` is arithmetic; its body is still screened.
                self.substitution(body);
            }
            Some('{') => {
                self.chars.next();
                let mut name = String::new();
                for c in self.chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    name.push(c);
                }
                self.variable(&name, quoted);
            }
            Some('\'') if !quoted => {
                self.chars.next();
                self.ansi_c_quoted();
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                let mut name = String::new();
                if c.is_ascii_alphabetic() || c == '_' {
                    while let Some(c) = self
                        .chars
                        .next_if(|c| c.is_ascii_alphanumeric() || *c == '_')
                    {
                        name.push(c);
                    }
                } else {
                    self.chars.next();
                    name.push(c);
                }
                self.variable(&name, quoted);
            }
            _ => self.word.text.push('$'),
        }
    }

    fn variable(&mut self, name: &str, quoted: bool) {
        if name == "IFS" && !quoted {
            // `rm${IFS}-rf${IFS}/` splits into words exactly where `${IFS}` stands.
            self.end_word();
            return;
        }
        self.word.text.push('$');
        self.word.text.push_str(name);
        self.word.dynamic = true;
    }

    /// `$'…'`: decode `\xHH`, `\NNN`, `\n` and friends, as bash does.
    fn ansi_c_quoted(&mut self) {
        while let Some(c) = self.chars.next() {
            match c {
                '\'' => return,
                '\\' => {
                    let Some(e) = self.chars.next() else { return };
                    let decoded = match e {
                        'x' => self.radix_digits(16, 2),
                        '0'..='7' => {
                            let mut v = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                match self.chars.next_if(|c| c.is_digit(8)) {
                                    Some(d) => v = v * 8 + d.to_digit(8).unwrap_or(0),
                                    None => break,
                                }
                            }
                            char::from_u32(v)
                        }
                        'u' => self.radix_digits(16, 4),
                        'n' => Some('\n'),
                        't' => Some('\t'),
                        other => Some(other),
                    };
                    if let Some(d) = decoded {
                        self.word.text.push(d);
                    }
                }
                c => self.word.text.push(c),
            }
        }
    }

    fn radix_digits(&mut self, radix: u32, max: usize) -> Option<char> {
        let mut v = 0;
        for _ in 0..max {
            match self.chars.next_if(|c| c.is_digit(radix)) {
                Some(d) => v = v * radix + d.to_digit(radix).unwrap_or(0),
                None => break,
            }
        }
        char::from_u32(v)
    }

    fn until_paren(&mut self) -> String {
        let mut depth = 1;
        let mut body = String::new();
        for c in self.chars.by_ref() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            body.push(c);
        }
        body
    }

    fn until_backtick(&mut self) -> String {
        let mut body = String::new();
        while let Some(c) = self.chars.next() {
            match c {
                '`' => break,
                '\\' => {
                    if let Some(n) = self.chars.next() {
                        body.push(n);
                    }
                }
                c => body.push(c),
            }
        }
        body
    }

    fn substitution(&mut self, body: String) {
        self.word.text.push_str("$(…)");
        self.word.dynamic = true;
        self.script.nested.push(body);
    }

    fn redirect(&mut self, first: char) {
        // A number right before the operator is the descriptor it redirects (`2>/dev/null`).
        if self.in_word
            && !self.word.text.is_empty()
            && self.word.text.bytes().all(|b| b.is_ascii_digit())
        {
            self.word = Word::default();
            self.in_word = false;
        }
        self.end_word();
        let mut op = String::from(first);
        while let Some(c) = self.chars.next_if(|c| matches!(c, '<' | '>' | '&' | '|')) {
            op.push(c);
        }
        self.pending_redirect = Some(op);
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.in_word = false;
        match self.pending_redirect.take() {
            Some(op) => self.simple.redirects.push((op, word.text)),
            None => self.simple.words.push(word),
        }
    }

    fn separator(&mut self, sep: Sep) {
        self.end_word();
        if let Some(op) = self.pending_redirect.take() {
            self.simple.redirects.push((op, String::new()));
        }
        let simple = std::mem::take(&mut self.simple);
        if !simple.words.is_empty() || !simple.redirects.is_empty() {
            self.pipeline.push(simple);
        }
        if sep == Sep::Pipeline && !self.pipeline.is_empty() {
            let pipeline = std::mem::take(&mut self.pipeline);
            self.script.pipelines.push(pipeline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<Vec<String>>> {
        lex(text)
            .pipelines
            .iter()
            .map(|p| {
                p.iter()
                    .map(|s| s.words.iter().map(|w| w.text.clone()).collect())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn quoting_tricks_are_undone() {
        for text in [
            "rm -rf /",
            "r'm' -rf /",
            "\"r\"m -rf /",
            "r\\m -rf /",
            "$'\\x72\\x6d' -rf /",
            "$'\\162m' -rf /",
            "rm${IFS}-rf${IFS}/",
            "rm$IFS-rf$IFS/",
        ] {
            assert_eq!(words(text), [[["rm", "-rf", "/"]]], "{text}");
        }
    }

    #[test]
    fn pipelines_and_lists_are_split() {
        assert_eq!(
            words("a | b c && d; e & f || g\nh"),
            vec![
                vec![vec!["a"], vec!["b", "c"]],
                vec![vec!["d"]],
                vec![vec!["e"]],
                vec![vec!["f"]],
                vec![vec!["g"]],
                vec![vec!["h"]],
            ]
        );
    }

    #[test]
    fn substitutions_are_collected_and_marked_dynamic() {
        let script = lex("echo $(curl x | sh) `id` <(cat y) \"$(whoami)\"");
        assert_eq!(script.nested, ["curl x | sh", "id", "cat y", "whoami"]);
        assert!(script.pipelines[0][0].words[1].dynamic);
    }

    #[test]
    fn redirections_are_separate_from_words() {
        let script = lex("echo hi > /dev/sda 2>/dev/null");
        let simple = &script.pipelines[0][0];
        assert_eq!(simple.words.len(), 2);
        assert_eq!(simple.redirects[0], (">".into(), "/dev/sda".into()));
    }
}
