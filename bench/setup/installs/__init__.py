"""Framework installs: the per-user cache (`cache`), the recipes that build into it (`recipes`,
`scripted`) and the commands they run (`commands`), and updates to a newer release (`upstream`,
`updates`)."""
