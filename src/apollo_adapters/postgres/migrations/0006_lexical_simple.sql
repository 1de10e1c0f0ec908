-- Lexical search reads the full-text vector of each entry. It moves from the 'english'
-- configuration to 'simple': names, numbers, versions and identifiers are kept exactly as
-- written (lowercased) and nothing is stemmed. Stop words stay in the vector; queries drop
-- them (apollo_domain.lexical.STOPWORDS). Still generated from content, so it never lags.

DROP INDEX IF EXISTS entries_lexical;
ALTER TABLE entries DROP COLUMN lexical;
ALTER TABLE entries ADD COLUMN lexical tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, content)) STORED;
CREATE INDEX entries_lexical ON entries USING gin (lexical);
