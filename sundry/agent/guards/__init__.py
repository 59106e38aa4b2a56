"""What a tool call or a reply must pass before it has an effect or reaches the customer: the call
guards, consent, approval rules, spending, confirmation cards, the reply check and what a reply
claims, run limits. Pure: plain data in, verdicts out."""
